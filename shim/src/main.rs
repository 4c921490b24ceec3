//! `cuba-exec`: serve MCP on stdin/stdout. Logs go to stderr; stdout carries only the protocol.

use anyhow::Result;
use cuba_exec::transport::LineTransport;
use cuba_exec::CubaExec;
use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        // An editor may close our stderr: the formatter's own report of that would panic.
        .log_internal_errors(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CUBA_EXEC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let server = CubaExec::new(cuba_protocol::paths::socket_path());
    // Not rmcp's stdio transport: that one leaves a line it cannot parse unanswered.
    let (stdin, stdout) = cuba_exec::stdio::stdio();
    let service = server.serve(LineTransport::new(stdin, stdout)).await?;
    service.waiting().await?;
    Ok(())
}
