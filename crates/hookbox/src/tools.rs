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
    /// True when `reported_cost` is an estimate, not a billed figure.
    pub cost_estimated: bool,
}

impl ToolOutput {
    /// A successful result with `content`, no reported cost.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput { content: content.into(), success: true, reported_cost: None, cost_estimated: false }
    }

    /// A failed result whose `content` says why, no reported cost.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput { content: content.into(), success: false, reported_cost: None, cost_estimated: false }
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

/// A delay every tool call waits before it runs, in ms: a test seam only
/// (the process-killing tests of crash recovery need a tool call that lasts).
static TEST_TOOL_DELAY_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Test seam: makes every tool call of this process wait `ms` milliseconds
/// before it runs (0, the default, for none). Not for production use.
#[doc(hidden)]
pub fn set_test_tool_delay_ms(ms: u64) {
    TEST_TOOL_DELAY_MS.store(ms, std::sync::atomic::Ordering::SeqCst);
}

pub(crate) fn test_delay() -> std::time::Duration {
    std::time::Duration::from_millis(TEST_TOOL_DELAY_MS.load(std::sync::atomic::Ordering::SeqCst))
}

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
mod tests;
