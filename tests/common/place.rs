//! Where tests that use mDNS run: a network namespace of their own when
//! the test runs as root (so not even the mDNS daemon's start-up touches a
//! real interface), else this machine's namespace with mDNS restricted to
//! IPv4 loopback.

use std::process::{Command, Stdio};

/// A test's network namespace, if it could make one; removed when dropped.
pub struct Place {
    netns: Option<String>,
}

impl Place {
    /// A fresh namespace named after `tag` (with loopback up), or none when not root.
    pub fn new(tag: &str) -> Self {
        let name = format!("cake-{tag}-{}", std::process::id());
        let created = Command::new("ip")
            .args(["netns", "add", &name])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            && Command::new("ip").args(["-n", &name, "link", "set", "lo", "up"]).status().is_ok_and(|s| s.success());
        if created {
            Self { netns: Some(name) }
        } else {
            eprintln!(
                "note: cannot create a network namespace (not root?): mDNS stays on IPv4 loopback of this machine"
            );
            Self { netns: None }
        }
    }

    /// `program`, to be run inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, program]);
                c
            }
            None => Command::new(program),
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(ns) = &self.netns {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

impl Place {
    /// Runs `work` on a thread whose sockets live in the namespace (so the
    /// test can speak to servers started with [`Place::command`]).
    pub fn run<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        let netns = self.netns.clone();
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    if let Some(ns) = netns {
                        let file = std::fs::File::open(format!("/var/run/netns/{ns}")).expect("the namespace exists");
                        use std::os::fd::AsRawFd;
                        // SAFETY: setns only changes this thread's network namespace.
                        let done = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                        assert_eq!(done, 0, "cannot enter namespace {ns}: {}", std::io::Error::last_os_error());
                    }
                    work()
                })
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }
}
