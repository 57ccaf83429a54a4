//! The `hookbox` binary: a thin wrapper over [`hookbox_cli::main_with_args`].

fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKBOX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    let code = hookbox_cli::main_with_args(std::env::args_os(), &mut std::io::stdout(), &mut std::io::stderr());
    std::process::exit(code);
}
