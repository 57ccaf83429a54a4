"""The Rust deny-tools unit tests, for the Python policy (run natively:
``PYTHONPATH=../../../guest-sdk/python python3 -m unittest`` in this folder)."""

import unittest

from policy import DEFAULT_PATH_KEYS, Policy, normalize


def policy(**pairs):
    return Policy(lambda key: pairs.get(key))


class PolicyTest(unittest.TestCase):
    def test_denies_listed_tools_whatever_the_arguments(self):
        p = policy(tools='["delete_file", "shell"]')
        self.assertEqual(p.check("shell", None), "deny-tools: tool `shell` is denied")
        self.assertIsNotNone(p.check("delete_file", {}))
        self.assertIsNone(p.check("read_file", {"path": ".env"}))

    def test_a_single_string_is_a_list_of_one(self):
        p = policy(tools="shell", paths=".env")
        self.assertIsNotNone(p.check("shell", None))
        self.assertIsNotNone(p.check("read_file", {"path": ".env"}))

    def test_pattern_without_slash_matches_any_component(self):
        p = policy(paths='[".env", "*.pem"]')
        self.assertEqual(
            p.check("delete_file", {"path": ".env"}), "deny-tools: `delete_file` on `.env` is denied (pattern `.env`)"
        )
        for path in ["./.env", "app/.env", "/abs/dir/.env", ".env/inner", "keys/a.pem"]:
            self.assertIsNotNone(p.check("read_file", {"path": path}), path)
        for path in [".envrc", "env", "a.pem.txt", ""]:
            self.assertIsNone(p.check("read_file", {"path": path}), path)

    def test_pattern_with_slash_matches_the_whole_relative_path(self):
        p = policy(paths='["config/*.toml", "./secrets/**", "deploy/keys"]')
        for path in [
            "config/a.toml",
            "./config/a.toml",
            "config/./a.toml",
            "x/../config/a.toml",
            "secrets/a/b/c",
            "deploy/keys",
            "deploy/keys/id_rsa",
        ]:
            self.assertIsNotNone(p.check("read_file", {"path": path}), path)
        for path in ["config/sub/a.toml", "app/config/a.toml", "a.toml", "deploy/keys2"]:
            self.assertIsNone(p.check("read_file", {"path": path}), path)

    def test_dot_dot_does_not_escape_a_rule(self):
        p = policy(paths="secrets/*")
        self.assertIsNotNone(p.check("read_file", {"path": "a/../secrets/key"}))
        self.assertIsNone(p.check("read_file", {"path": "../secrets/key"}))

    def test_path_keys_default_and_custom(self):
        p = policy(paths=".env")
        for key in DEFAULT_PATH_KEYS:
            self.assertIsNotNone(p.check("t", {key: ".env"}), key)
        self.assertIsNone(p.check("t", {"target": ".env"}))
        p = policy(paths=".env", path_keys='["target"]')
        self.assertIsNotNone(p.check("t", {"target": ".env"}))
        self.assertIsNone(p.check("t", {"path": ".env"}))

    def test_array_arguments_and_non_string_values(self):
        p = policy(paths=".env", path_keys="paths")
        self.assertIsNotNone(p.check("t", {"paths": ["a.txt", "b/.env"]}))
        self.assertIsNone(p.check("t", {"paths": 3}))
        self.assertIsNone(p.check("t", [".env"]))
        self.assertIsNone(p.check("t", None))

    def test_custom_message_prefix(self):
        p = policy(paths=".env", message="policy")
        self.assertEqual(
            p.check("read_file", {"file": "./.env"}), "policy: `read_file` on `./.env` is denied (pattern `.env`)"
        )

    def test_invalid_config_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "invalid glob `a\\[`"):
            policy(paths='["a["]')
        with self.assertRaisesRegex(ValueError, "config `tools`"):
            policy(tools="[1, 2]")
        with self.assertRaisesRegex(ValueError, "single path component"):
            policy(paths="a**")

    def test_globs_beyond_the_rust_tests(self):
        p = policy(paths='["[ab]?.key", "**/cache/*", "x/[!0-9]*"]')
        self.assertIsNotNone(p.check("t", {"path": "deep/a1.key"}))
        self.assertIsNone(p.check("t", {"path": "c1.key"}))
        self.assertIsNotNone(p.check("t", {"path": "cache/x"}))
        self.assertIsNotNone(p.check("t", {"path": "a/b/cache/x"}))
        self.assertIsNotNone(p.check("t", {"path": "x/abc"}))
        self.assertIsNone(p.check("t", {"path": "x/1bc"}))

    def test_normalize_paths(self):
        self.assertEqual(normalize("./a//b/./c/"), ["a", "b", "c"])
        self.assertEqual(normalize("a/../../b"), ["..", "b"])
        self.assertEqual(normalize("/"), [])


if __name__ == "__main__":
    unittest.main()
