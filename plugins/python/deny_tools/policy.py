"""deny-tools' policy, in plain Python (no component imports), so that it runs
under the host's ``python3`` too (``python3 -m unittest`` in this folder).

It mirrors ``plugins/deny-tools/src/lib.rs`` rule for rule: the same config
keys, the same path normalisation, the glob crate's (0.3) pattern syntax and
matching with ``require_literal_separator`` (``*``, ``?`` and ``[...]`` never
match ``/``; ``**`` as a whole component crosses them), and the same reasons.
"""

from hookbox_sdk import parse_string_list

CONFIG_KEYS = ("tools", "paths", "path_keys", "message")
DEFAULT_PATH_KEYS = ("path", "file", "file_path", "filename", "dir", "directory",
                     "notebook_path", "absolute_path", "paths", "file_paths", "target_file")

# Tokens of a compiled glob.
_CHAR, _ANY_CHAR, _ANY_SEQ, _ANY_REC, _WITHIN, _EXCEPT = range(6)


class GlobError(ValueError):
    """An invalid pattern, with the glob crate's message."""

    def __init__(self, pos, msg):
        super().__init__(f"Pattern syntax error near position {pos}: {msg}")


def _char_specifiers(chars):
    out, i = [], 0
    while i < len(chars):
        if i + 3 <= len(chars) and chars[i + 1] == "-":
            out.append((chars[i], chars[i + 2]))
            i += 3
        else:
            out.append((chars[i], chars[i]))
            i += 1
    return out


def compile_glob(pattern):
    """Tokenises ``pattern`` exactly as ``glob::Pattern::new`` does."""
    chars, tokens, i = list(pattern), [], 0
    while i < len(chars):
        c = chars[i]
        if c == "?":
            tokens.append((_ANY_CHAR, None))
            i += 1
        elif c == "*":
            old = i
            while i < len(chars) and chars[i] == "*":
                i += 1
            count = i - old
            if count > 2:
                raise GlobError(old + 2, "wildcards are either regular `*` or recursive `**`")
            if count == 2:
                if i == 2 or chars[i - count - 1] == "/":
                    if i < len(chars) and chars[i] == "/":
                        i += 1
                    elif i != len(chars):
                        raise GlobError(i, "recursive wildcards must form a single path component")
                else:
                    raise GlobError(old - 1, "recursive wildcards must form a single path component")
                if not (len(tokens) > 1 and tokens[-1][0] == _ANY_REC):
                    tokens.append((_ANY_REC, None))
            else:
                tokens.append((_ANY_SEQ, None))
        elif c == "[":
            if i + 4 <= len(chars) and chars[i + 1] == "!":
                rest = chars[i + 3 :]
                if "]" in rest:
                    j = rest.index("]")
                    tokens.append((_EXCEPT, _char_specifiers(chars[i + 2 : i + 3 + j])))
                    i += j + 4
                    continue
            elif i + 3 <= len(chars) and chars[i + 1] != "!":
                rest = chars[i + 2 :]
                if "]" in rest:
                    j = rest.index("]")
                    tokens.append((_WITHIN, _char_specifiers(chars[i + 1 : i + 2 + j])))
                    i += j + 3
                    continue
            raise GlobError(i, "invalid range pattern")
        else:
            tokens.append((_CHAR, c))
            i += 1
    return tokens


_MATCH, _SUB_NO, _ENTIRE_NO = range(3)


def _within(specs, c):
    return any(lo <= c <= hi for lo, hi in specs)


def _matches_from(tokens, follows_sep, text, pos, ti):
    """``glob::Pattern::matches_from`` with case_sensitive, require_literal_separator
    and no require_literal_leading_dot."""
    while ti < len(tokens):
        kind, arg = tokens[ti]
        if kind in (_ANY_SEQ, _ANY_REC):
            m = _matches_from(tokens, follows_sep, text, pos, ti + 1)
            if m != _SUB_NO:
                return m
            while pos < len(text):
                c = text[pos]
                pos += 1
                follows_sep = c == "/"
                if kind == _ANY_REC and not follows_sep:
                    continue
                if kind == _ANY_SEQ and follows_sep:
                    return _SUB_NO
                m = _matches_from(tokens, follows_sep, text, pos, ti + 1)
                if m != _SUB_NO:
                    return m
            # As in Rust: the text is used up; go on with the next token.
            ti += 1
            continue
        if pos >= len(text):
            return _ENTIRE_NO
        c = text[pos]
        pos += 1
        is_sep = c == "/"
        if kind in (_ANY_CHAR, _WITHIN, _EXCEPT) and is_sep:
            ok = False
        elif kind == _ANY_CHAR:
            ok = True
        elif kind == _WITHIN:
            ok = _within(arg, c)
        elif kind == _EXCEPT:
            ok = not _within(arg, c)
        else:
            ok = c == arg
        if not ok:
            return _SUB_NO
        follows_sep = is_sep
        ti += 1
    return _MATCH if pos >= len(text) else _SUB_NO


def glob_matches(tokens, text):
    """Whether compiled ``tokens`` match all of ``text``."""
    return _matches_from(tokens, True, text, 0, 0) == _MATCH


def normalize(path):
    """Components of ``path``: empty and ``.`` dropped, ``a/..`` pairs resolved
    (a ``..`` with nothing before it is kept)."""
    out = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and out and out[-1] != "..":
            out.pop()
        else:
            out.append(part)
    return out


class PathRule:
    """One ``paths`` glob."""

    def __init__(self, text):
        trimmed = text.strip()
        if trimmed.startswith("./"):
            trimmed = trimmed[2:]
        trimmed = trimmed.rstrip("/")
        try:
            self.glob = compile_glob(trimmed)
        except GlobError as e:
            raise ValueError(f"deny-tools: invalid glob `{text}` in `paths`: {e}")
        self.text = text
        self.whole_path = "/" in trimmed

    def matches(self, components):
        if self.whole_path:
            return any(glob_matches(self.glob, "/".join(components[:n])) for n in range(1, len(components) + 1))
        return any(glob_matches(self.glob, c) for c in components)


class Policy:
    """What the plugin denies, read from its config through ``get`` (key -> raw value or None)."""

    def __init__(self, get):
        def lst(key):
            raw = get(key)
            if raw is None:
                return None
            try:
                return parse_string_list(raw)
            except ValueError as e:
                raise ValueError(f"deny-tools: config `{key}` must be a string or an array of strings: {e}")

        self.paths = [PathRule(p) for p in (lst("paths") or [])]
        keys = lst("path_keys")
        self.path_keys = list(DEFAULT_PATH_KEYS) if keys is None else keys
        message = (get("message") or "").strip()
        self.prefix = message if message else "deny-tools"
        self.tools = lst("tools") or []

    def check(self, tool, args):
        """The reason to deny ``tool`` with ``args`` (parsed arguments, or None
        when they did not parse), or None to let it run."""
        if tool in self.tools:
            return f"{self.prefix}: tool `{tool}` is denied"
        if not isinstance(args, dict):
            return None
        for key in self.path_keys:
            if key not in args:
                continue
            value = args[key]
            if isinstance(value, str):
                paths = [value]
            elif isinstance(value, list):
                paths = [v for v in value if isinstance(v, str)]
            else:
                paths = []
            for path in paths:
                rule = self._matching_rule(path)
                if rule is not None:
                    return f"{self.prefix}: `{tool}` on `{path}` is denied (pattern `{rule.text}`)"
        return None

    def _matching_rule(self, path):
        components = normalize(path)
        if not components:
            return None
        for rule in self.paths:
            if rule.matches(components):
                return rule
        return None
