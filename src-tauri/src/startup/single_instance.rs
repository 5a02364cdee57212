//! One window per user: the first `cake` listens on a Unix socket in the
//! data folder; a later launch connects, asks it to show its window and
//! exits. A socket left by a crashed instance refuses connections, so the
//! next launch removes it and takes over.

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

/// What a later launch sends.
const SHOW: &[u8] = b"show\n";

/// The outcome of trying to be the only instance.
pub enum Claim {
    /// This process is the first: it answers later launches on this socket.
    First(UnixListener),
    /// Another instance runs and was asked to show its window.
    AlreadyRunning,
}

/// Becomes the instance for `socket`, or hands over to the one that is.
pub fn claim(socket: &Path) -> Result<Claim> {
    if let Ok(mut running) = UnixStream::connect(socket) {
        running.set_write_timeout(Some(Duration::from_secs(2)))?;
        running.write_all(SHOW).context("the running Cake did not take the request to show its window")?;
        return Ok(Claim::AlreadyRunning);
    }
    // Nobody answers: a socket file left behind, or none.
    let _ = std::fs::remove_file(socket);
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let listener = UnixListener::bind(socket).with_context(|| format!("cannot listen on {}", socket.display()))?;
    Ok(Claim::First(listener))
}

/// Calls `show` for every later launch, on a thread of its own.
pub fn answer(listener: UnixListener, show: impl Fn() + Send + 'static) {
    std::thread::Builder::new()
        .name("single-instance".into())
        .spawn(move || {
            for connection in listener.incoming() {
                let Ok(mut connection) = connection else { continue };
                let _ = connection.set_read_timeout(Some(Duration::from_secs(2)));
                let mut request = [0u8; 8];
                let mut read = 0;
                while read < SHOW.len() {
                    match connection.read(&mut request[read..]) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => read += n,
                    }
                }
                if request[..read] == *SHOW {
                    show();
                }
            }
        })
        .expect("spawn the single-instance thread");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_second_launch_asks_the_first_to_show_its_window() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("data").join("window.sock");
        let Claim::First(listener) = claim(&socket).unwrap() else { panic!("the first launch is first") };
        let (shown, show_requests) = mpsc::channel();
        answer(listener, move || shown.send(()).unwrap());
        assert!(matches!(claim(&socket).unwrap(), Claim::AlreadyRunning));
        show_requests.recv_timeout(Duration::from_secs(5)).expect("the first instance was asked to show");
        // A stray connection that says something else is ignored.
        UnixStream::connect(&socket).unwrap().write_all(b"hello\n").unwrap();
        assert!(matches!(claim(&socket).unwrap(), Claim::AlreadyRunning));
        show_requests.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(show_requests.try_recv().is_err(), "only real requests show the window");
    }

    #[test]
    fn a_socket_left_by_a_crashed_instance_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("window.sock");
        drop(UnixListener::bind(&socket).unwrap()); // the file stays, nobody listens
        assert!(socket.exists());
        assert!(matches!(claim(&socket).unwrap(), Claim::First(_)));
    }
}
