//! `mcp-demo-server [--root DIR] [--http ADDR] [--misbehave MODE]`: serves
//! the demo MCP server on stdio (the default) or streamable HTTP.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use mcp_demo_server::{DemoServer, Misbehavior};

const USAGE: &str = "usage: mcp-demo-server [--root DIR] [--http ADDR] \
[--misbehave garbage|silent|bad-schema|colliding|exit-on-call|paginated]

  --root DIR        the directory the filesystem tools are confined to
                    (default: the current directory)
  --http ADDR       serve streamable HTTP at http://ADDR/mcp instead of stdio,
                    e.g. 127.0.0.1:0 for any free port
  --misbehave MODE  play a hostile stdio server instead (for client tests)";

/// What the command line asks for.
struct Options {
    root: Option<PathBuf>,
    http: Option<SocketAddr>,
    misbehave: Option<Misbehavior>,
}

fn parse(mut arguments: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        root: None,
        http: None,
        misbehave: None,
    };
    while let Some(flag) = arguments.next() {
        let mut value = || {
            arguments
                .next()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--root" if options.root.is_none() => options.root = Some(PathBuf::from(value()?)),
            "--http" if options.http.is_none() => {
                let address = value()?;
                let parsed = address
                    .parse()
                    .map_err(|_| format!("--http: not an address and port: {address}"))?;
                options.http = Some(parsed);
            }
            "--misbehave" if options.misbehave.is_none() => {
                let mode = value()?;
                let parsed = Misbehavior::from_flag(&mode)
                    .ok_or_else(|| format!("--misbehave: unknown mode: {mode}"))?;
                options.misbehave = Some(parsed);
            }
            "--root" | "--http" | "--misbehave" => return Err(format!("{flag} given twice")),
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    if options.misbehave.is_some() && options.http.is_some() {
        return Err("--misbehave serves stdio only; it cannot be combined with --http".into());
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(problem) => {
            eprintln!("mcp-demo-server: {problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let outcome = if let Some(mode) = options.misbehave {
        mcp_demo_server::serve_misbehaving_stdio(mode).await
    } else {
        let root = options.root.unwrap_or_else(|| PathBuf::from("."));
        let server = DemoServer::new(root);
        match options.http {
            Some(address) => serve_http(server, address).await,
            None => mcp_demo_server::serve_stdio(server).await,
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mcp-demo-server: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Serves HTTP until interrupted.
async fn serve_http(server: DemoServer, address: SocketAddr) -> Result<(), mcp_demo_server::Error> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| mcp_demo_server::Error::Io {
            context: "cannot listen on the --http address",
            source,
        })?;
    let http = mcp_demo_server::serve_http(server, listener).await?;
    eprintln!("listening on {}", http.url());
    // Serves until the process is killed; `http` lives as long.
    std::future::pending::<()>().await;
    drop(http);
    Ok(())
}
