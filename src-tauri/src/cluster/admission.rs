//! What a peer without the key can cost a worker: little, and never for long.
//!
//! A connection is only a candidate until it proves it holds the cluster
//! key. Candidates get a slot before anything is spent on them (no thread,
//! no buffer): at most [`Limits::pending`] at once, and at most
//! [`Limits::pending_per_address`] from one address (an IPv6 /64 counts as
//! one). A newcomer is never refused for want of a slot: it takes the
//! oldest slot of its own address when that address holds its share, or
//! else the oldest slot of the address holding the most, whose connection
//! is closed. So a few addresses that reopen idle connections as fast as
//! they are dropped only ever evict each other. A slot is held for at most
//! one handshake deadline ([`Deadlined`]), and the peer's first message
//! must come within [`FIRST_MESSAGE_DEADLINE`] of that; a peer that drips
//! its bytes or goes silent loses its slot then, whatever it sends.
//!
//! Each handshake is one guess at the key. An address whose guesses failed
//! waits for its turn before the next one is answered ([`GuessThrottle`]):
//! the wait doubles with each failure from [`FIRST_GUESS_WAIT`] up to
//! [`LONGEST_GUESS_WAIT`], and a connection whose turn is further off than
//! that is closed at once.
//! Authenticated masters are capped too ([`Limits::sessions`]). Errors from
//! `accept` itself (out of descriptors, say) back off instead of spinning
//! ([`AcceptBackoff`]).

use crate::guesses::{GuessThrottle, Origin};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a candidate has for its first message (the hello that opens
/// the handshake).
pub const FIRST_MESSAGE_DEADLINE: Duration = Duration::from_secs(1);

/// The wait after an address's first failed handshake, doubled by each one after.
pub const FIRST_GUESS_WAIT: Duration = Duration::from_millis(100);
/// The longest wait between two handshakes of an address that keeps failing.
pub const LONGEST_GUESS_WAIT: Duration = Duration::from_secs(2);

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

/// A candidate connection holding a slot.
struct Candidate {
    origin: Origin,
    since: Instant,
    /// A handle on its socket, shut down if the slot is taken from it.
    socket: Option<TcpStream>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    candidates: HashMap<u64, Candidate>,
    sessions: usize,
}

impl State {
    fn count_from(&self, origin: Origin) -> usize {
        self.candidates.values().filter(|c| c.origin == origin).count()
    }

    /// The candidate to close for a newcomer from `origin`, if one must go:
    /// the oldest of its own origin when that holds its share, else, when
    /// every slot is taken, the oldest of the origin holding the most.
    fn to_evict(&self, origin: Origin, limits: &Limits) -> Option<u64> {
        let oldest_of = |origin: Origin| {
            self.candidates.iter().filter(|(_, c)| c.origin == origin).min_by_key(|(_, c)| c.since).map(|(&id, _)| id)
        };
        if self.count_from(origin) >= limits.pending_per_address {
            return oldest_of(origin);
        }
        if self.candidates.len() < limits.pending {
            return None;
        }
        let mut held: HashMap<Origin, (usize, Instant)> = HashMap::new();
        for c in self.candidates.values() {
            let entry = held.entry(c.origin).or_insert((0, c.since));
            entry.0 += 1;
            entry.1 = entry.1.min(c.since);
        }
        // The most slots; among equals, the one holding the oldest.
        let (&greediest, _) = held.iter().max_by_key(|(_, &(count, oldest))| (count, std::cmp::Reverse(oldest)))?;
        oldest_of(greediest)
    }

    fn evict(&mut self, id: u64) {
        if let Some(candidate) = self.candidates.remove(&id) {
            if let Some(socket) = candidate.socket {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }
}

/// The slots of one worker.
pub struct Admission {
    limits: Limits,
    state: Mutex<State>,
    guesses: GuessThrottle,
}

impl Admission {
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Mutex::default(),
            guesses: GuessThrottle::new(FIRST_GUESS_WAIT, LONGEST_GUESS_WAIT),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A handshake slot for a connection from `address`, taken from an
    /// older candidate if none is free (whose `socket` is then shut down).
    pub fn admit(self: &Arc<Self>, address: IpAddr, socket: Option<TcpStream>) -> Ticket {
        let origin = Origin::of(address);
        let mut state = self.state();
        if let Some(evicted) = state.to_evict(origin, &self.limits) {
            state.evict(evicted);
        }
        let id = state.next_id;
        state.next_id += 1;
        state.candidates.insert(id, Candidate { origin, since: Instant::now(), socket });
        Ticket { admission: self.clone(), id, origin, authenticated: false }
    }

    /// Connections in their handshake now.
    pub fn pending(&self) -> usize {
        self.state().candidates.len()
    }
}

/// A connection's slot, given back when dropped.
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    origin: Origin,
    authenticated: bool,
}

impl Ticket {
    /// Waits for this origin's turn to have a guess at the key answered;
    /// an error when it is too far off (the connection should be closed).
    pub fn wait_for_turn(&self) -> io::Result<()> {
        let turn = self.admission.guesses.take_turn(self.origin).ok_or_else(|| {
            io::Error::new(io::ErrorKind::WouldBlock, "too many failed handshakes from this address; try later")
        })?;
        std::thread::sleep(turn.saturating_duration_since(Instant::now()));
        Ok(())
    }

    /// Records that this connection's guess at the key was wrong (or that
    /// it left before its guess could be checked).
    pub fn failed_guess(&self) {
        self.admission.guesses.failed(self.origin);
    }

    /// Moves the connection from the handshake slots to the session slots;
    /// false (and the ticket unchanged) if every session slot is taken or
    /// its slot was given to a newcomer meanwhile.
    pub fn authenticated(&mut self) -> bool {
        if self.authenticated {
            return true;
        }
        let mut state = self.admission.state();
        if state.sessions >= self.admission.limits.sessions || !state.candidates.contains_key(&self.id) {
            return false;
        }
        state.sessions += 1;
        state.candidates.remove(&self.id);
        self.admission.guesses.succeeded(self.origin);
        self.authenticated = true;
        true
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.admission.state();
        if self.authenticated {
            state.sessions -= 1;
        } else {
            state.candidates.remove(&self.id);
        }
    }
}

/// A socket whose every read and write must finish by one deadline: the
/// whole handshake gets one allowance, not one per read. Its first bytes
/// may be given a shorter one ([`Self::first_bytes_within`]).
pub struct Deadlined<'a> {
    stream: &'a mut TcpStream,
    deadline: Instant,
    /// Bytes still to read before `first_deadline` no longer applies.
    first_bytes: usize,
    first_deadline: Instant,
}

impl<'a> Deadlined<'a> {
    pub fn new(stream: &'a mut TcpStream, allowance: Duration) -> Self {
        let deadline = Instant::now() + allowance;
        Self { stream, deadline, first_bytes: 0, first_deadline: deadline }
    }

    /// The first `bytes` read must arrive within `allowance`.
    pub fn first_bytes_within(mut self, bytes: usize, allowance: Duration) -> Self {
        self.first_bytes = bytes;
        self.first_deadline = self.deadline.min(Instant::now() + allowance);
        self
    }

    /// The time left, as a socket timeout; an error once it has run out.
    fn left(&self) -> io::Result<Duration> {
        let deadline = if self.first_bytes > 0 { self.first_deadline } else { self.deadline };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the handshake took longer than its deadline"));
        }
        Ok(left)
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        let read = self.stream.read(buf)?;
        self.first_bytes = self.first_bytes.saturating_sub(read);
        Ok(read)
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

    fn origin(last: u8) -> IpAddr {
        [127, 0, 0, last].into()
    }

    #[test]
    fn a_newcomer_takes_the_oldest_slot_of_its_own_address_or_of_the_greediest() {
        let admission = Admission::new(Limits { pending: 4, pending_per_address: 2, sessions: 1 });
        let a: Vec<Ticket> = (0..2).map(|_| admission.admit(origin(2), None)).collect();
        let b = admission.admit(origin(3), None);
        // A third from `a` takes a's oldest slot.
        let a_third = admission.admit(origin(2), None);
        assert_eq!(admission.pending(), 3);
        let mut a = a.into_iter();
        let mut a_first = a.next().unwrap();
        assert!(!a_first.authenticated(), "its slot went to the newcomer");
        let c = admission.admit(origin(4), None);
        assert_eq!(admission.pending(), 4, "every slot is taken");
        // Full: a newcomer from a fresh address takes a slot of `a`, the greediest.
        let mut d = admission.admit(origin(5), None);
        assert_eq!(admission.pending(), 4);
        let (mut a_second, mut a_third, mut b, mut c) = (a.next().unwrap(), a_third, b, c);
        assert!(!a_second.authenticated(), "a's oldest went");
        assert!(d.authenticated() && !b.authenticated(), "one session slot");
        drop(d);
        assert!(a_third.authenticated());
        drop((a_first, a_second, a_third));
        assert!(c.authenticated(), "the session slot came back");
        drop((b, c));
        assert_eq!(admission.pending(), 0);
    }

    #[test]
    fn an_evicted_connection_is_shut_down() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let admission = Admission::new(Limits { pending: 1, pending_per_address: 1, sessions: 1 });
        let client = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let _first = admission.admit(peer.ip(), Some(accepted.try_clone().unwrap()));
        let _second = admission.admit(peer.ip(), None);
        let mut reader = accepted;
        reader.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(reader.read(&mut [0u8; 8]).unwrap(), 0, "the evicted socket reads its end at once");
        drop(client);
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
