//! Guesses at a secret over the network, throttled per client address.
//!
//! Every attempt to prove a secret (a worker's cluster handshake, an API
//! key sent to `cake serve`) is one guess. An address whose guesses failed
//! gets turns: its next attempt is answered no sooner than a wait after
//! its last turn, a wait that doubles with each failure up to a ceiling.
//! Turns are taken in order, so attempts sent in parallel queue behind one
//! another instead of all being answered at once, and an attempt whose
//! turn is further off than the ceiling is refused outright (nothing is
//! held for it). A success forgets the address's failures; failures are
//! forgotten after [`MEMORY`] without one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures older than this are forgotten.
pub const MEMORY: Duration = Duration::from_secs(600);
/// Addresses remembered at once (the stalest is forgotten first).
const MOST_ORIGINS: usize = 4096;

/// Where an attempt comes from: an IPv4 address, or the /64 network of an
/// IPv6 one (one machine's usual share, so it cannot rotate addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Origin(IpAddr);

impl Origin {
    pub fn of(address: IpAddr) -> Self {
        match address {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => Self(IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into())),
            },
            v4 => Self(v4),
        }
    }
}

/// One origin's failed guesses.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    /// When its next attempt may be answered.
    next_turn: Instant,
    last: Instant,
}

/// What became of an attempt (see [`GuessThrottle::attempt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// It was checked: right or not.
    Checked(bool),
    /// Not its turn: it may come back then.
    ComeBackAt(Instant),
    /// Its turn would be further off than the longest wait.
    Refused,
}

/// The failed guesses of every origin, and the turns they get.
pub struct GuessThrottle {
    first_wait: Duration,
    longest_wait: Duration,
    failures: Mutex<HashMap<Origin, Failures>>,
}

type Table = HashMap<Origin, Failures>;

impl GuessThrottle {
    /// A throttle whose wait is `first_wait` after one failure, doubling
    /// with each further one up to `longest_wait`.
    pub fn new(first_wait: Duration, longest_wait: Duration) -> Self {
        Self { first_wait, longest_wait, failures: Mutex::default() }
    }

    fn wait_after(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(16);
        (self.first_wait * (1u32 << doublings)).min(self.longest_wait)
    }

    /// The table, with `origin`'s failures forgotten if they are stale.
    fn table(&self, origin: Origin, now: Instant) -> std::sync::MutexGuard<'_, Table> {
        let mut all = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if all.get(&origin).is_some_and(|f| now.duration_since(f.last) > MEMORY) {
            all.remove(&origin);
        }
        all
    }

    /// When the next attempt from `origin` may be answered (now, if it has
    /// no recent failures), or `None` when that is further off than the
    /// longest wait. A turn given is taken.
    pub fn take_turn(&self, origin: Origin) -> Option<Instant> {
        let now = Instant::now();
        self.take_turn_in(&mut self.table(origin, now), origin, now)
    }

    fn take_turn_in(&self, all: &mut Table, origin: Origin, now: Instant) -> Option<Instant> {
        let Some(failures) = all.get_mut(&origin) else { return Some(now) };
        let turn = failures.next_turn.max(now);
        if turn.duration_since(now) > self.longest_wait {
            return None;
        }
        failures.next_turn = turn + self.wait_after(failures.count);
        Some(turn)
    }

    /// One attempt from `origin` whose outcome `check` tells at once
    /// (true when right). When it is the origin's turn (`reserved` is a
    /// turn this attempt was given before), `check` runs under this
    /// throttle's lock and its outcome is recorded before any other attempt
    /// of that origin is judged: attempts sent together meet the wait from
    /// the second on. Else the attempt is given a turn to come back at.
    pub fn attempt(&self, origin: Origin, reserved: Option<Instant>, check: impl FnOnce() -> bool) -> Attempt {
        let now = Instant::now();
        let mut all = self.table(origin, now);
        let its_turn = all
            .get(&origin)
            .is_none_or(|failures| reserved.is_some_and(|turn| turn <= now) || failures.next_turn <= now);
        if !its_turn {
            return match self.take_turn_in(&mut all, origin, now) {
                Some(turn) => Attempt::ComeBackAt(turn),
                None => Attempt::Refused,
            };
        }
        let right = check();
        match right {
            true => drop(all.remove(&origin)),
            false => self.fail_in(&mut all, origin, now),
        }
        Attempt::Checked(right)
    }

    /// Records a wrong guess from `origin`.
    pub fn failed(&self, origin: Origin) {
        let now = Instant::now();
        self.fail_in(&mut self.table(origin, now), origin, now);
    }

    fn fail_in(&self, all: &mut Table, origin: Origin, now: Instant) {
        if !all.contains_key(&origin) && all.len() >= MOST_ORIGINS {
            if let Some(stalest) = all.iter().min_by_key(|(_, f)| f.last).map(|(&o, _)| o) {
                all.remove(&stalest);
            }
        }
        let failures = all.entry(origin).or_insert(Failures { count: 0, next_turn: now, last: now });
        failures.count = failures.count.saturating_add(1);
        failures.last = now;
        failures.next_turn = failures.next_turn.max(now + self.wait_after(failures.count));
    }

    /// Forgets `origin`'s failures: it proved the secret.
    pub fn succeeded(&self, origin: Origin) {
        self.table(origin, Instant::now()).remove(&origin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(last: u8) -> Origin {
        Origin::of([127, 0, 0, last].into())
    }

    #[test]
    fn an_ipv6_network_counts_as_one_address_and_mapped_ipv4_as_ipv4() {
        let one: IpAddr = "2001:db8:1:2::5".parse().unwrap();
        let same_network: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other_network: IpAddr = "2001:db8:1:3::5".parse().unwrap();
        assert_eq!(Origin::of(one), Origin::of(same_network));
        assert_ne!(Origin::of(one), Origin::of(other_network));
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        assert_eq!(Origin::of(mapped), origin(2));
    }

    #[test]
    fn failed_guesses_space_out_an_addresses_turns_until_one_succeeds() {
        let throttle = GuessThrottle::new(Duration::from_millis(100), Duration::from_secs(2));
        let guesser = origin(9);
        let now = Instant::now();
        assert!(throttle.take_turn(guesser).unwrap() <= Instant::now(), "no failure, no wait");
        for _ in 0..3 {
            throttle.failed(guesser);
        }
        // After three failures: 400 ms between turns.
        let first = throttle.take_turn(guesser).unwrap();
        let second = throttle.take_turn(guesser).unwrap();
        assert!(first >= now + Duration::from_millis(400), "{:?}", first - now);
        assert_eq!(second - first, Duration::from_millis(400));
        for _ in 0..10 {
            throttle.failed(guesser);
        }
        let longest = throttle.take_turn(guesser).unwrap();
        assert!(longest >= Instant::now() + Duration::from_millis(1900), "the wait stops growing at two seconds");
        assert!(throttle.take_turn(guesser).is_none(), "a turn further off than that is refused");
        assert!(throttle.take_turn(origin(10)).unwrap() <= Instant::now(), "other addresses are not held up");
        throttle.succeeded(guesser);
        assert!(throttle.take_turn(guesser).unwrap() <= Instant::now(), "a success cleared the failures");
    }

    #[test]
    fn attempts_sent_together_are_judged_one_by_one() {
        let throttle = GuessThrottle::new(Duration::from_secs(1), Duration::from_secs(8));
        let guesser = origin(7);
        let outcomes: Vec<Attempt> = (0..4).map(|_| throttle.attempt(guesser, None, || false)).collect();
        assert_eq!(outcomes[0], Attempt::Checked(false));
        let Attempt::ComeBackAt(turn) = outcomes[1] else { panic!("{outcomes:?}") };
        assert!(turn >= Instant::now() + Duration::from_millis(900), "the second waits a second");
        assert!(matches!(outcomes[2], Attempt::ComeBackAt(later) if later > turn), "{outcomes:?}");
        assert_eq!(throttle.attempt(guesser, Some(Instant::now()), || true), Attempt::Checked(true));
        assert_eq!(throttle.attempt(guesser, None, || true), Attempt::Checked(true), "the right key cleared it");
    }
}
