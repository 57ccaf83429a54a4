//! Local tools the model can call, and the workspace they are confined to.
//!
//! A [`Tool`] has a [`ToolSpec`] (name, description, JSON Schema of its
//! arguments) and an async [`Tool::call`] that never fails: every failure,
//! including a refused path or a bad argument, is a [`ToolOutput`] with
//! `success: false` whose text tells the model what went wrong.
//!
//! [`workspace_tools`] returns the file tools `list_dir`, `read_file`,
//! `create_file` and `delete_file`, all confined to one [`Workspace`]
//! directory. Confinement has two layers:
//!
//! 1. a lexical check of the path argument, which refuses absolute paths,
//!    any `..` component, NUL bytes and (for the file tools) the empty path
//!    with a clear message;
//! 2. cap-std: every file-system call goes through a [`cap_std::fs::Dir`]
//!    opened on the workspace, which refuses to resolve any path, including
//!    one through a symbolic link, to a location outside that directory.
//!
//! The file-system calls are synchronous (they are small and local) and run
//! on the calling task.

use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use hookbox_providers::ToolSpec;

/// What a tool call produced: the text the model receives and whether it worked.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The result text (on failure, the reason, e.g. `refused: path ...`).
    pub content: String,
    /// False when the tool failed or refused; sent as `is_error` where the
    /// wire format has it.
    pub success: bool,
    /// What the call cost in US dollars, when the tool knows (e.g. a paid
    /// API); `None` for local tools.
    pub reported_cost: Option<f64>,
}

impl ToolOutput {
    /// A successful result with `content`, no reported cost.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput { content: content.into(), success: true, reported_cost: None }
    }

    /// A failed result whose `content` says why, no reported cost.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput { content: content.into(), success: false, reported_cost: None }
    }
}

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The tool's name, description and argument schema, as sent to the model.
    fn spec(&self) -> ToolSpec;

    /// Runs the tool with `arguments` (the parsed JSON arguments of the call,
    /// normally an object). Never panics and never fails: problems are
    /// reported as a [`ToolOutput`] with `success: false`.
    async fn call(&self, arguments: &Value) -> ToolOutput;
}

/// Errors opening a [`Workspace`].
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The workspace path does not exist.
    #[error("workspace directory {} does not exist", path.display())]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The workspace path exists but is not a directory.
    #[error("workspace path {} is not a directory", path.display())]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The workspace directory could not be inspected or opened.
    #[error("cannot open workspace directory {}: {source}", path.display())]
    Open {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
}

/// A directory the file tools are confined to, held open as a cap-std
/// [`cap_std::fs::Dir`] capability.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    dir: cap_std::fs::Dir,
}

impl Workspace {
    /// Opens the directory at `path` (a symbolic link to a directory is
    /// followed here, once).
    ///
    /// # Errors
    ///
    /// [`ToolError::NotFound`] when `path` does not exist,
    /// [`ToolError::NotADirectory`] when it is not a directory,
    /// [`ToolError::Open`] for any other I/O failure.
    pub fn open(path: impl AsRef<Path>) -> Result<Workspace, ToolError> {
        let path = path.as_ref().to_path_buf();
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(ToolError::NotADirectory { path }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ToolError::NotFound { path }),
            Err(source) => return Err(ToolError::Open { path, source }),
        }
        match cap_std::fs::Dir::open_ambient_dir(&path, cap_std::ambient_authority()) {
            Ok(dir) => Ok(Workspace { root: path, dir }),
            Err(source) => Err(ToolError::Open { path, source }),
        }
    }

    /// The path the workspace was opened with.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// The largest file `read_file` returns: 1 MiB.
pub const MAX_READ_BYTES: u64 = 1024 * 1024;

/// The most entries `list_dir` lists; the rest are counted.
pub const MAX_LIST_ENTRIES: usize = 1000;

/// The workspace file tools, in this order:
///
/// * `list_dir {path?}`: the entries of a directory (default `.`), sorted by
///   name, one per line; directories end with `/`, symbolic links with `@`.
/// * `read_file {path}`: a file's text; refuses files over
///   [`MAX_READ_BYTES`] and files that are not UTF-8.
/// * `create_file {path, content?}`: creates a new file with `content`
///   (default empty); refuses to overwrite an existing path and does not
///   create missing parent directories.
/// * `delete_file {path}`: deletes a regular file; refuses directories and
///   symbolic links.
///
/// Every tool refuses paths that escape `ws` (see the module docs) and
/// arguments outside its schema, naming the argument.
pub fn workspace_tools(ws: Arc<Workspace>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ListDir { ws: Arc::clone(&ws) }),
        Arc::new(ReadFile { ws: Arc::clone(&ws) }),
        Arc::new(CreateFile { ws: Arc::clone(&ws) }),
        Arc::new(DeleteFile { ws }),
    ]
}

// ---------------------------------------------------------------------------
// Arguments and paths

/// The arguments as an object, after refusing any key not in `allowed`.
fn arguments<'a>(tool: &str, arguments: &'a Value, allowed: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let Some(obj) = arguments.as_object() else {
        return Err(format!("{tool}: arguments must be a JSON object, got {}", type_name(arguments)));
    };
    if let Some(unknown) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        let takes = allowed.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ");
        return Err(format!("{tool}: unknown argument `{unknown}` ({tool} takes {takes})"));
    }
    Ok(obj)
}

/// An optional string argument (`null` counts as absent).
fn optional_string<'a>(tool: &str, obj: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, String> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("{tool}: argument `{name}` must be a string, got {}", type_name(other))),
    }
}

/// A required string argument.
fn required_string<'a>(tool: &str, obj: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    optional_string(tool, obj, name)?.ok_or_else(|| format!("{tool}: missing required argument `{name}` (a string)"))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The lexical confinement check: the relative path to hand to cap-std, or
/// the refusal text. `.` components are dropped; an all-`.` path is `.`.
fn confine(arg: &str, allow_empty: bool) -> Result<PathBuf, String> {
    if arg.is_empty() {
        return if allow_empty { Ok(PathBuf::from(".")) } else { Err("refused: the path is empty".into()) };
    }
    if arg.contains('\0') {
        return Err(format!("refused: path `{}` contains a NUL byte", arg.escape_default()));
    }
    let mut out = PathBuf::new();
    for component in Path::new(arg).components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {
                return Err(format!(
                    "refused: path `{arg}` escapes the workspace (absolute paths are not allowed; \
                     give a path relative to the workspace root)"
                ));
            }
            Component::ParentDir => {
                return Err(format!("refused: path `{arg}` escapes the workspace (`..` components are not allowed)"));
            }
            Component::CurDir => {}
            Component::Normal(part) => out.push(part),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    Ok(out)
}

/// True for cap-std's refusal to resolve a path outside its `Dir`.
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains("outside of the filesystem")
}

/// The model-facing text for an I/O error on `arg` while doing `what`.
fn io_failure(what: &str, arg: &str, e: &io::Error) -> String {
    if is_escape(e) {
        return format!("refused: path `{arg}` escapes the workspace (through a symbolic link)");
    }
    match e.kind() {
        io::ErrorKind::NotFound => format!("cannot {what} `{arg}`: no such file or directory"),
        io::ErrorKind::PermissionDenied => format!("cannot {what} `{arg}`: permission denied"),
        io::ErrorKind::NotADirectory => format!("cannot {what} `{arg}`: a component of the path is not a directory"),
        _ => format!("cannot {what} `{arg}`: {e}"),
    }
}

fn plural(n: u64, one: &str) -> String {
    if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") }
}

fn path_schema(required: bool, extra: Option<(&str, Value)>) -> Value {
    let mut properties = Map::new();
    properties.insert("path".into(), json!({"type": "string"}));
    if let Some((name, schema)) = extra {
        properties.insert(name.into(), schema);
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if required {
        schema.insert("required".into(), json!(["path"]));
    }
    schema.insert("additionalProperties".into(), json!(false));
    Value::Object(schema)
}

// ---------------------------------------------------------------------------
// The tools

struct ListDir {
    ws: Arc<Workspace>,
}

impl ListDir {
    fn run(&self, arguments: &Value) -> Result<String, String> {
        const TOOL: &str = "list_dir";
        let obj = self::arguments(TOOL, arguments, &["path"])?;
        let arg = optional_string(TOOL, obj, "path")?.unwrap_or(".");
        let path = confine(arg, true)?;
        let entries = self.ws.dir.read_dir(&path).map_err(|e| io_failure("list", arg, &e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_failure("list", arg, &e))?;
            let mut name = entry.file_name().to_string_lossy().into_owned();
            match entry.file_type() {
                Ok(t) if t.is_dir() => name.push('/'),
                Ok(t) if t.is_symlink() => name.push('@'),
                _ => {}
            }
            names.push(name);
        }
        if names.is_empty() {
            return Ok(format!("`{arg}` is empty"));
        }
        names.sort();
        let total = names.len();
        names.truncate(MAX_LIST_ENTRIES);
        let mut out = names.join("\n");
        if total > MAX_LIST_ENTRIES {
            out.push_str(&format!("\n... and {} more", total - MAX_LIST_ENTRIES));
        }
        Ok(out)
    }
}

#[async_trait]
impl Tool for ListDir {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_dir".into(),
            description: "List the entries of a directory in the workspace, one per line, sorted by name. \
                          Directories end with `/`, symbolic links with `@`. `path` is relative to the \
                          workspace root and defaults to `.`."
                .into(),
            parameters: path_schema(false, None),
        }
    }

    async fn call(&self, arguments: &Value) -> ToolOutput {
        self.run(arguments).map_or_else(ToolOutput::error, ToolOutput::ok)
    }
}

struct ReadFile {
    ws: Arc<Workspace>,
}

impl ReadFile {
    fn run(&self, arguments: &Value) -> Result<String, String> {
        const TOOL: &str = "read_file";
        let obj = self::arguments(TOOL, arguments, &["path"])?;
        let arg = required_string(TOOL, obj, "path")?;
        let path = confine(arg, false)?;
        // Stat first: opening a FIFO or device could block or misbehave.
        let meta = self.ws.dir.metadata(&path).map_err(|e| io_failure("read", arg, &e))?;
        if meta.is_dir() {
            return Err(format!("cannot read `{arg}`: it is a directory (use list_dir)"));
        }
        if !meta.is_file() {
            return Err(format!("cannot read `{arg}`: it is not a regular file"));
        }
        let too_big = |size: u64| {
            format!(
                "refused: `{arg}` is {}, more than read_file's limit of {MAX_READ_BYTES} bytes (1 MiB)",
                plural(size, "byte")
            )
        };
        if meta.len() > MAX_READ_BYTES {
            return Err(too_big(meta.len()));
        }
        let file = self.ws.dir.open(&path).map_err(|e| io_failure("read", arg, &e))?;
        let mut bytes = Vec::new();
        file.take(MAX_READ_BYTES + 1).read_to_end(&mut bytes).map_err(|e| io_failure("read", arg, &e))?;
        if bytes.len() as u64 > MAX_READ_BYTES {
            return Err(too_big(bytes.len() as u64));
        }
        String::from_utf8(bytes).map_err(|e| {
            format!(
                "cannot read `{arg}`: it is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            )
        })
    }
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Read a UTF-8 text file in the workspace (at most 1 MiB) and return its content. \
                          `path` is relative to the workspace root."
                .into(),
            parameters: path_schema(true, None),
        }
    }

    async fn call(&self, arguments: &Value) -> ToolOutput {
        self.run(arguments).map_or_else(ToolOutput::error, ToolOutput::ok)
    }
}

struct CreateFile {
    ws: Arc<Workspace>,
}

impl CreateFile {
    fn run(&self, arguments: &Value) -> Result<String, String> {
        const TOOL: &str = "create_file";
        let obj = self::arguments(TOOL, arguments, &["path", "content"])?;
        let arg = required_string(TOOL, obj, "path")?;
        let content = optional_string(TOOL, obj, "content")?.unwrap_or_default();
        let path = confine(arg, false)?;
        let mut options = cap_std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        let mut file = self.ws.dir.open_with(&path, &options).map_err(|e| {
            if is_escape(&e) {
                io_failure("create", arg, &e)
            } else if e.kind() == io::ErrorKind::AlreadyExists {
                format!("refused: `{arg}` already exists (create_file never overwrites)")
            } else if e.kind() == io::ErrorKind::NotFound {
                format!(
                    "cannot create `{arg}`: its parent directory does not exist \
                     (create_file does not create directories)"
                )
            } else {
                io_failure("create", arg, &e)
            }
        })?;
        file.write_all(content.as_bytes()).and_then(|()| file.flush()).map_err(|e| io_failure("write", arg, &e))?;
        Ok(format!("created `{arg}` ({})", plural(content.len() as u64, "byte")))
    }
}

#[async_trait]
impl Tool for CreateFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "create_file".into(),
            description: "Create a new file in the workspace with the given text `content` (default empty). \
                          Refuses to overwrite an existing file; the parent directory must exist. \
                          `path` is relative to the workspace root."
                .into(),
            parameters: path_schema(true, Some(("content", json!({"type": "string"})))),
        }
    }

    async fn call(&self, arguments: &Value) -> ToolOutput {
        self.run(arguments).map_or_else(ToolOutput::error, ToolOutput::ok)
    }
}

struct DeleteFile {
    ws: Arc<Workspace>,
}

impl DeleteFile {
    fn run(&self, arguments: &Value) -> Result<String, String> {
        const TOOL: &str = "delete_file";
        let obj = self::arguments(TOOL, arguments, &["path"])?;
        let arg = required_string(TOOL, obj, "path")?;
        let path = confine(arg, false)?;
        // Not following the last component: a link is judged as a link.
        let meta = self.ws.dir.symlink_metadata(&path).map_err(|e| io_failure("delete", arg, &e))?;
        if meta.is_symlink() {
            return Err(match self.ws.dir.metadata(&path) {
                Err(e) if is_escape(&e) => {
                    format!("refused: path `{arg}` escapes the workspace (it is a symbolic link to outside)")
                }
                _ => format!("refused: `{arg}` is a symbolic link (delete_file deletes regular files only)"),
            });
        }
        if meta.is_dir() {
            return Err(format!("refused: `{arg}` is a directory (delete_file deletes files only)"));
        }
        if !meta.is_file() {
            return Err(format!("refused: `{arg}` is not a regular file (delete_file deletes regular files only)"));
        }
        self.ws.dir.remove_file(&path).map_err(|e| io_failure("delete", arg, &e))?;
        Ok(format!("deleted `{arg}`"))
    }
}

#[async_trait]
impl Tool for DeleteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "delete_file".into(),
            description: "Delete a regular file in the workspace (not a directory or symbolic link). \
                          `path` is relative to the workspace root."
                .into(),
            parameters: path_schema(true, None),
        }
    }

    async fn call(&self, arguments: &Value) -> ToolOutput {
        self.run(arguments).map_or_else(ToolOutput::error, ToolOutput::ok)
    }
}

#[cfg(test)]
mod tests {
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

        assert_refused(
            &f.call("list_dir", json!({"path": "nope"})).await,
            "cannot list `nope`: no such file or directory",
        );
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
        assert_refused(
            &f.call("delete_file", json!({"path": "link.txt"})).await,
            "refused: `link.txt` is a symbolic link",
        );
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
}
