use super::*;
use std::fs;

struct Fixture {
    _root: tempfile::TempDir,
    ws_path: PathBuf,
    outside: PathBuf,
    tools: Vec<Arc<dyn Tool>>,
}

impl Fixture {
    /// A temp dir holding `ws/` (the workspace) and `outside/` beside it.
    fn new() -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let ws_path = root.path().join("ws");
        let outside = root.path().join("outside");
        fs::create_dir(&ws_path).unwrap();
        fs::create_dir(&outside).unwrap();
        let ws = Arc::new(Workspace::open(&ws_path).unwrap());
        Fixture { _root: root, ws_path, outside, tools: workspace_tools(ws) }
    }

    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        let t = self.tools.iter().find(|t| t.spec().name == tool).unwrap();
        t.call(&args).await
    }

    fn ws(&self, rel: &str) -> PathBuf {
        self.ws_path.join(rel)
    }
}

fn assert_refused(out: &ToolOutput, want: &str) {
    assert!(!out.success, "expected a failure, got {out:?}");
    assert!(out.content.contains(want), "expected {want:?} in {:?}", out.content);
}

#[test]
fn open_errors_are_clear() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("missing");
    let err = Workspace::open(&missing).unwrap_err();
    assert!(matches!(err, ToolError::NotFound { .. }));
    assert_eq!(err.to_string(), format!("workspace directory {} does not exist", missing.display()));

    let file = root.path().join("file.txt");
    fs::write(&file, "x").unwrap();
    let err = Workspace::open(&file).unwrap_err();
    assert!(matches!(err, ToolError::NotADirectory { .. }));
    assert_eq!(err.to_string(), format!("workspace path {} is not a directory", file.display()));

    let ws = Workspace::open(root.path()).unwrap();
    assert_eq!(ws.root(), root.path());
}

#[test]
fn specs_match_fixture_08_schemas() {
    let f = Fixture::new();
    let names: Vec<_> = f.tools.iter().map(|t| t.spec().name).collect();
    assert_eq!(names, ["list_dir", "read_file", "create_file", "delete_file"]);
    let spec = |n: &str| f.tools.iter().map(|t| t.spec()).find(|s| s.name == n).unwrap();
    let fixture_schema = json!({
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": false,
    });
    assert_eq!(spec("delete_file").parameters, fixture_schema);
    assert_eq!(spec("read_file").parameters, fixture_schema);
    let mut with_content = fixture_schema.clone();
    with_content["properties"]["content"] = json!({"type": "string"});
    assert_eq!(spec("create_file").parameters, with_content);
    assert_eq!(
        spec("list_dir").parameters,
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": false})
    );
    for s in f.tools.iter().map(|t| t.spec()) {
        assert!(!s.description.is_empty(), "{}", s.name);
    }
}

#[tokio::test]
async fn list_dir_happy_path() {
    let f = Fixture::new();
    fs::write(f.ws("b.txt"), "b").unwrap();
    fs::write(f.ws(".env"), "SECRET=1").unwrap();
    fs::create_dir(f.ws("a")).unwrap();
    fs::write(f.ws("a/inner.txt"), "i").unwrap();

    let out = f.call("list_dir", json!({})).await;
    assert!(out.success, "{out:?}");
    assert_eq!(out.content, ".env\na/\nb.txt");
    assert_eq!(out.reported_cost, None);
    assert_eq!(f.call("list_dir", json!({"path": "."})).await.content, ".env\na/\nb.txt");
    assert_eq!(f.call("list_dir", json!({"path": ""})).await.content, ".env\na/\nb.txt");
    assert_eq!(f.call("list_dir", json!({"path": null})).await.content, ".env\na/\nb.txt");
    assert_eq!(f.call("list_dir", json!({"path": "./a/"})).await.content, "inner.txt");

    fs::create_dir(f.ws("empty")).unwrap();
    let out = f.call("list_dir", json!({"path": "empty"})).await;
    assert!(out.success);
    assert_eq!(out.content, "`empty` is empty");

    assert_refused(&f.call("list_dir", json!({"path": "nope"})).await, "cannot list `nope`: no such file or directory");
    assert_refused(
        &f.call("list_dir", json!({"path": "b.txt"})).await,
        "cannot list `b.txt`: a component of the path is not a directory",
    );
}

#[tokio::test]
async fn read_file_happy_path_and_limits() {
    let f = Fixture::new();
    fs::create_dir(f.ws("dir")).unwrap();
    fs::write(f.ws("dir/hello.txt"), "héllo\n").unwrap();
    let out = f.call("read_file", json!({"path": "dir/hello.txt"})).await;
    assert!(out.success, "{out:?}");
    assert_eq!(out.content, "héllo\n");

    fs::write(f.ws("big.bin"), vec![b'a'; (MAX_READ_BYTES + 1) as usize]).unwrap();
    assert_refused(
        &f.call("read_file", json!({"path": "big.bin"})).await,
        "refused: `big.bin` is 1048577 bytes, more than read_file's limit of 1048576 bytes (1 MiB)",
    );
    fs::write(f.ws("exact.txt"), vec![b'a'; MAX_READ_BYTES as usize]).unwrap();
    assert!(f.call("read_file", json!({"path": "exact.txt"})).await.success);

    fs::write(f.ws("latin1.txt"), b"ab\xe9").unwrap();
    assert_refused(
        &f.call("read_file", json!({"path": "latin1.txt"})).await,
        "cannot read `latin1.txt`: it is not UTF-8 text (invalid byte at offset 2)",
    );
    assert_refused(&f.call("read_file", json!({"path": "dir"})).await, "it is a directory");
    assert_refused(&f.call("read_file", json!({"path": "nope.txt"})).await, "no such file or directory");
}

#[tokio::test]
async fn create_file_happy_path_and_refusals() {
    let f = Fixture::new();
    let out = f.call("create_file", json!({"path": "test.txt"})).await;
    assert!(out.success, "{out:?}");
    assert_eq!(out.content, "created `test.txt` (0 bytes)");
    assert_eq!(fs::read_to_string(f.ws("test.txt")).unwrap(), "");

    fs::create_dir(f.ws("sub")).unwrap();
    let out = f.call("create_file", json!({"path": "sub/notes.md", "content": "# hi\n"})).await;
    assert!(out.success, "{out:?}");
    assert_eq!(out.content, "created `sub/notes.md` (5 bytes)");
    assert_eq!(fs::read_to_string(f.ws("sub/notes.md")).unwrap(), "# hi\n");

    let out = f.call("create_file", json!({"path": "test.txt", "content": "new"})).await;
    assert_refused(&out, "refused: `test.txt` already exists (create_file never overwrites)");
    assert_eq!(fs::read_to_string(f.ws("test.txt")).unwrap(), "");

    assert_refused(
        &f.call("create_file", json!({"path": "missing/x.txt"})).await,
        "cannot create `missing/x.txt`: its parent directory does not exist",
    );
    assert!(!f.ws("missing").exists());
}

#[tokio::test]
async fn delete_file_happy_path_and_refusals() {
    let f = Fixture::new();
    fs::write(f.ws(".env"), "SECRET=1").unwrap();
    let out = f.call("delete_file", json!({"path": ".env"})).await;
    assert!(out.success, "{out:?}");
    assert_eq!(out.content, "deleted `.env`");
    assert!(!f.ws(".env").exists());

    assert_refused(
        &f.call("delete_file", json!({"path": ".env"})).await,
        "cannot delete `.env`: no such file or directory",
    );
    fs::create_dir(f.ws("d")).unwrap();
    assert_refused(&f.call("delete_file", json!({"path": "d"})).await, "refused: `d` is a directory");
    assert!(f.ws("d").is_dir());

    // A link to a file inside the workspace: neither the link nor the file goes.
    fs::write(f.ws("target.txt"), "t").unwrap();
    std::os::unix::fs::symlink("target.txt", f.ws("link.txt")).unwrap();
    assert_refused(&f.call("delete_file", json!({"path": "link.txt"})).await, "refused: `link.txt` is a symbolic link");
    assert!(f.ws("target.txt").exists());
    assert!(f.ws("link.txt").symlink_metadata().is_ok());
    // Reading through an inside link is fine.
    assert_eq!(f.call("read_file", json!({"path": "link.txt"})).await.content, "t");
}

#[tokio::test]
async fn parent_dir_and_absolute_paths_are_refused() {
    let f = Fixture::new();
    fs::write(f.outside.join("secret.txt"), "outside").unwrap();
    let abs = f.outside.join("secret.txt").display().to_string();
    for (tool, extra) in [
        ("read_file", json!({})),
        ("delete_file", json!({})),
        ("create_file", json!({"content": "x"})),
        ("list_dir", json!({})),
    ] {
        for (path, want) in [
            (
                "../outside/secret.txt",
                "refused: path `../outside/secret.txt` escapes the workspace (`..` components are not allowed)",
            ),
            ("..", "refused: path `..` escapes the workspace"),
            ("a/../../x", "refused: path `a/../../x` escapes the workspace"),
            (abs.as_str(), "escapes the workspace (absolute paths are not allowed"),
            ("/etc/passwd", "refused: path `/etc/passwd` escapes the workspace"),
        ] {
            let mut args = extra.clone();
            args["path"] = json!(path);
            assert_refused(&f.call(tool, args).await, want);
        }
    }
    assert_eq!(fs::read_to_string(f.outside.join("secret.txt")).unwrap(), "outside");
    assert!(!f.outside.join("x").exists());
}

#[tokio::test]
async fn symlink_to_outside_file_is_refused() {
    let f = Fixture::new();
    let secret = f.outside.join("secret.txt");
    fs::write(&secret, "outside").unwrap();
    std::os::unix::fs::symlink(&secret, f.ws("abs_link")).unwrap();
    std::os::unix::fs::symlink("../outside/secret.txt", f.ws("rel_link")).unwrap();

    for link in ["abs_link", "rel_link"] {
        assert_refused(
            &f.call("read_file", json!({"path": link})).await,
            &format!("refused: path `{link}` escapes the workspace (through a symbolic link)"),
        );
        assert_refused(
            &f.call("delete_file", json!({"path": link})).await,
            &format!("refused: path `{link}` escapes the workspace (it is a symbolic link to outside)"),
        );
        assert_refused(&f.call("create_file", json!({"path": link})).await, "already exists");
    }
    assert_eq!(fs::read_to_string(&secret).unwrap(), "outside");
    // The listing shows the links as links without following them.
    assert_eq!(f.call("list_dir", json!({})).await.content, "abs_link@\nrel_link@");
}

#[tokio::test]
async fn symlinked_dir_to_outside_is_refused() {
    let f = Fixture::new();
    fs::write(f.outside.join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(&f.outside, f.ws("out")).unwrap();
    std::os::unix::fs::symlink("../outside", f.ws("rel_out")).unwrap();

    for dir in ["out", "rel_out"] {
        let path = format!("{dir}/new.txt");
        assert_refused(
            &f.call("create_file", json!({"path": path, "content": "pwned"})).await,
            &format!("refused: path `{path}` escapes the workspace (through a symbolic link)"),
        );
        let path = format!("{dir}/secret.txt");
        assert_refused(
            &f.call("read_file", json!({"path": path})).await,
            "escapes the workspace (through a symbolic link)",
        );
        assert_refused(
            &f.call("delete_file", json!({"path": path})).await,
            "escapes the workspace (through a symbolic link)",
        );
        assert_refused(
            &f.call("list_dir", json!({"path": dir})).await,
            "escapes the workspace (through a symbolic link)",
        );
    }
    assert!(!f.outside.join("new.txt").exists());
    assert_eq!(fs::read_to_string(f.outside.join("secret.txt")).unwrap(), "outside");
}

#[tokio::test]
async fn bad_arguments_name_the_argument() {
    let f = Fixture::new();
    let cases = [
        ("read_file", json!({}), "read_file: missing required argument `path` (a string)"),
        ("delete_file", json!({"path": null}), "delete_file: missing required argument `path` (a string)"),
        ("create_file", json!({"content": "x"}), "create_file: missing required argument `path` (a string)"),
        ("read_file", json!({"path": 3}), "read_file: argument `path` must be a string, got a number"),
        (
            "create_file",
            json!({"path": "a", "content": ["x"]}),
            "create_file: argument `content` must be a string, got an array",
        ),
        ("list_dir", json!({"path": true}), "list_dir: argument `path` must be a string, got a boolean"),
        (
            "create_file",
            json!({"path": "a", "contents": "x"}),
            "create_file: unknown argument `contents` (create_file takes `path`, `content`)",
        ),
        ("delete_file", json!("x.txt"), "delete_file: arguments must be a JSON object, got a string"),
        ("read_file", json!({"path": ""}), "refused: the path is empty"),
        ("create_file", json!({"path": ""}), "refused: the path is empty"),
        ("delete_file", json!({"path": ""}), "refused: the path is empty"),
        ("read_file", json!({"path": "a\u{0}b"}), "refused: path `a\\u{0}b` contains a NUL byte"),
    ];
    for (tool, args, want) in cases {
        let out = f.call(tool, args.clone()).await;
        assert!(!out.success, "{tool} {args}: {out:?}");
        assert_eq!(out.content, want, "{tool} {args}");
    }
    assert!(!f.ws("a").exists());
}

#[test]
fn confine_normalises_current_dir_components() {
    assert_eq!(confine("./a/./b/", false).unwrap(), PathBuf::from("a/b"));
    assert_eq!(confine("./", true).unwrap(), PathBuf::from("."));
    assert_eq!(confine("", true).unwrap(), PathBuf::from("."));
    assert!(confine("", false).is_err());
}
