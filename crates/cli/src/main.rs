//! The `hookbox` binary: a thin wrapper over [`hookbox_cli::main_process`].

fn main() {
    std::process::exit(hookbox_cli::main_process());
}
