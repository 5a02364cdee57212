//! What a peer without the key can cost a worker: little, and never for long.
//!
//! A connection is only a candidate until it proves it holds the cluster
//! key. Candidates get a slot before anything is spent on them (no thread,
//! no buffer): at most [`Limits::pending`] at once, and at most
//! [`Limits::pending_per_address`] from one address, so one machine cannot
//! take every slot. A slot is held for at most one handshake deadline
//! ([`Deadlined`]); a peer that drips its bytes or goes silent loses it then,
//! whatever it sends. Authenticated masters are capped too
//! ([`Limits::sessions`]). Errors from `accept` itself (out of descriptors,
//! say) back off instead of spinning ([`AcceptBackoff`]).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many connections may be in each state.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections still in their handshake.
    pub pending: usize,
    /// Of those, from one address.
    pub pending_per_address: usize,
    /// Authenticated masters.
    pub sessions: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { pending: 16, pending_per_address: 4, sessions: 32 }
    }
}

#[derive(Default)]
struct Counts {
    pending: usize,
    per_address: HashMap<IpAddr, usize>,
    sessions: usize,
}

/// The slots of one worker.
pub struct Admission {
    limits: Limits,
    counts: Mutex<Counts>,
}

impl Admission {
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self { limits, counts: Mutex::default() })
    }

    /// A handshake slot for a connection from `address`, if one is free.
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Option<Ticket> {
        let mut counts = self.counts.lock().expect("admission counts");
        let from_address = counts.per_address.get(&address).copied().unwrap_or(0);
        if counts.pending >= self.limits.pending || from_address >= self.limits.pending_per_address {
            return None;
        }
        counts.pending += 1;
        counts.per_address.insert(address, from_address + 1);
        Some(Ticket { admission: self.clone(), address, authenticated: false })
    }

    /// Connections in their handshake now.
    pub fn pending(&self) -> usize {
        self.counts.lock().expect("admission counts").pending
    }

    fn release_pending(counts: &mut Counts, address: IpAddr) {
        counts.pending -= 1;
        match counts.per_address.get_mut(&address) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                counts.per_address.remove(&address);
            }
        }
    }
}

/// A connection's slot, given back when dropped.
pub struct Ticket {
    admission: Arc<Admission>,
    address: IpAddr,
    authenticated: bool,
}

impl Ticket {
    /// Moves the connection from the handshake slots to the session slots;
    /// false (and the ticket unchanged) if every session slot is taken.
    pub fn authenticated(&mut self) -> bool {
        if self.authenticated {
            return true;
        }
        let mut counts = self.admission.counts.lock().expect("admission counts");
        if counts.sessions >= self.admission.limits.sessions {
            return false;
        }
        counts.sessions += 1;
        Admission::release_pending(&mut counts, self.address);
        self.authenticated = true;
        true
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut counts = self.admission.counts.lock().expect("admission counts");
        if self.authenticated {
            counts.sessions -= 1;
        } else {
            Admission::release_pending(&mut counts, self.address);
        }
    }
}

/// A socket whose every read and write must finish by one deadline: the
/// whole handshake gets one allowance, not one per read.
pub struct Deadlined<'a> {
    stream: &'a mut TcpStream,
    deadline: Instant,
}

impl<'a> Deadlined<'a> {
    pub fn new(stream: &'a mut TcpStream, allowance: Duration) -> Self {
        Self { stream, deadline: Instant::now() + allowance }
    }

    /// The time left, as a socket timeout; an error once it has run out.
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the handshake took longer than its deadline"));
        }
        Ok(left)
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        self.stream.read(buf)
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Waits after failed `accept`s, doubling from 5 ms to 1 s, so that a
/// listener out of descriptors does not spin a core.
#[derive(Default)]
pub struct AcceptBackoff {
    wait: Option<Duration>,
}

impl AcceptBackoff {
    pub fn failed(&mut self) {
        let wait = self.wait.map_or(Duration::from_millis(5), |w| (w * 2).min(Duration::from_secs(1)));
        self.wait = Some(wait);
        std::thread::sleep(wait);
    }

    pub fn succeeded(&mut self) {
        self.wait = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};

    #[test]
    fn slots_are_capped_in_all_and_per_address_and_given_back() {
        let admission = Admission::new(Limits { pending: 3, pending_per_address: 2, sessions: 1 });
        let (a, b, c) = ([127, 0, 0, 2].into(), [127, 0, 0, 3].into(), [127, 0, 0, 4].into());
        let a1 = admission.admit(a).unwrap();
        let mut a2 = admission.admit(a).unwrap();
        assert!(admission.admit(a).is_none(), "two per address");
        let b1 = admission.admit(b).unwrap();
        assert!(admission.admit(c).is_none(), "three in all");
        assert!(a2.authenticated(), "a session slot is free");
        assert_eq!(admission.pending(), 2);
        let c1 = admission.admit(c).unwrap();
        let mut b1 = b1;
        assert!(!b1.authenticated(), "the one session slot is taken");
        drop((a1, a2, c1, b1));
        assert_eq!(admission.pending(), 0);
        assert!(admission.admit(a).unwrap().authenticated(), "the session slot came back");
    }

    #[test]
    fn a_dripping_peer_runs_out_of_time_whatever_it_sends() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let dripper = std::thread::spawn(move || {
            let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
            for _ in 0..20 {
                if stream.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let (mut stream, _) = listener.accept().unwrap();
        let started = Instant::now();
        let mut deadlined = Deadlined::new(&mut stream, Duration::from_millis(500));
        let mut buf = [0u8; 64];
        let err = deadlined.read_exact(&mut buf).unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(800), "{:?}", started.elapsed());
        assert!(matches!(err.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock), "{err}");
        drop(stream);
        dripper.join().unwrap();
    }
}
