//! A local SMTP server for the e-mail channel's tests: it speaks enough of
//! RFC 5321 for a real client (greeting, EHLO, MAIL, RCPT, DATA with dot
//! unstuffing, RSET, NOOP, QUIT), keeps every message it accepts, and can
//! be told to refuse a recipient (550) or every message for now (451). A
//! test file includes it as `#[path = "support/smtp.rs"] mod smtp;`.
//!
//! Written here rather than taken from a crate: a test needs a server
//! that misbehaves on cue, and the protocol's happy path is a few lines.

#![allow(dead_code)] // each test file uses a different part

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// A message the server accepted.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    /// The envelope's sender.
    pub(crate) from: String,
    /// The envelope's recipients.
    pub(crate) to: Vec<String>,
    /// The message as sent, headers and body.
    pub(crate) data: Vec<u8>,
}

impl Received {
    /// The message's text body, decoded as a mail client decodes it.
    pub(crate) fn body(&self) -> String {
        mailparse::parse_mail(&self.data)
            .expect("a message")
            .get_body()
            .expect("a text body")
    }

    /// A header's decoded value.
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        use mailparse::MailHeaderMap;
        mailparse::parse_mail(&self.data)
            .expect("a message")
            .headers
            .get_first_value(name)
    }

    /// The signed link in the body (`…/links/TOKEN`).
    pub(crate) fn link(&self) -> String {
        self.body()
            .lines()
            .map(str::trim)
            .find(|line| line.contains("/links/"))
            .expect("a signed link in the message")
            .to_owned()
    }
}

/// What the server refuses.
#[derive(Debug, Default)]
struct Refusals {
    /// Recipients answered 550 (no such mailbox).
    recipients: Vec<String>,
    /// Every message answered 451 at MAIL (try again later).
    all_for_now: bool,
}

/// The server: its port, and what it received.
pub(crate) struct SmtpServer {
    pub(crate) port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    refusals: Arc<Mutex<Refusals>>,
}

impl SmtpServer {
    /// Starts a server on a free port of 127.0.0.1.
    pub(crate) async fn start() -> SmtpServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let port = listener.local_addr().expect("bound").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let refusals = Arc::new(Mutex::new(Refusals::default()));
        let (kept, refused) = (Arc::clone(&received), Arc::clone(&refusals));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (kept, refused) = (Arc::clone(&kept), Arc::clone(&refused));
                tokio::spawn(async move {
                    // A client that goes away ends its session; nothing more.
                    let _ = session(stream, kept, refused).await;
                });
            }
        });
        SmtpServer {
            port,
            received,
            refusals,
        }
    }

    /// `smtp://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Refuses `address` as a recipient (550) from now on.
    pub(crate) fn refuse_recipient(&self, address: &str) {
        self.refusals
            .lock()
            .expect("refusals")
            .recipients
            .push(address.to_owned());
    }

    /// Refuses every message for now (451), or takes them again.
    pub(crate) fn refuse_all_for_now(&self, refuse: bool) {
        self.refusals.lock().expect("refusals").all_for_now = refuse;
        if !refuse {
            self.refusals.lock().expect("refusals").recipients.clear();
        }
    }

    /// What it received so far.
    pub(crate) fn received(&self) -> Vec<Received> {
        self.received.lock().expect("received").clone()
    }

    /// The messages once there are `count`, within 30 s.
    pub(crate) async fn wait_for(&self, count: usize) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} messages received, {count} awaited",
                received.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One client's session.
async fn session(
    stream: tokio::net::TcpStream,
    kept: Arc<Mutex<Vec<Received>>>,
    refusals: Arc<Mutex<Refusals>>,
) -> std::io::Result<()> {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    writer.write_all(b"220 standin ESMTP\r\n").await?;
    let mut from = None;
    let mut to = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_owned();
        let verb = command
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" => b"250-standin\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n",
            "HELO" | "NOOP" => b"250 ok\r\n",
            "RSET" => {
                from = None;
                to.clear();
                b"250 ok\r\n"
            }
            "MAIL" => {
                if refusals.lock().expect("refusals").all_for_now {
                    b"451 4.3.0 try again later\r\n"
                } else {
                    from = Some(address_in(&command));
                    to.clear();
                    b"250 ok\r\n"
                }
            }
            "RCPT" => {
                let address = address_in(&command);
                if refusals
                    .lock()
                    .expect("refusals")
                    .recipients
                    .contains(&address)
                {
                    b"550 5.1.1 no such mailbox\r\n"
                } else {
                    to.push(address);
                    b"250 ok\r\n"
                }
            }
            "DATA" if from.is_some() && !to.is_empty() => {
                writer.write_all(b"354 go on\r\n").await?;
                let mut data = Vec::new();
                loop {
                    let mut text = String::new();
                    if reader.read_line(&mut text).await? == 0 {
                        return Ok(());
                    }
                    if text == ".\r\n" {
                        break;
                    }
                    // Dot unstuffing (RFC 5321 §4.5.2).
                    let text = text.strip_prefix('.').unwrap_or(&text);
                    data.extend_from_slice(text.as_bytes());
                }
                kept.lock().expect("received").push(Received {
                    from: from.take().unwrap_or_default(),
                    to: std::mem::take(&mut to),
                    data,
                });
                b"250 ok: queued\r\n"
            }
            "DATA" => b"503 5.5.1 no sender or recipient\r\n",
            "QUIT" => {
                writer.write_all(b"221 bye\r\n").await?;
                return Ok(());
            }
            _ => b"502 5.5.2 not implemented\r\n",
        };
        writer.write_all(reply).await?;
    }
}

/// The address in `MAIL FROM:<…>` or `RCPT TO:<…>`.
fn address_in(command: &str) -> String {
    let start = command.find('<').map_or(0, |at| at + 1);
    let end = command[start..]
        .find('>')
        .map_or(command.len(), |at| start + at);
    command[start..end].to_owned()
}
