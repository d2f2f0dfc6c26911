//! The BTL Management Layer: which modules serve which peer.
//!
//! After the modex every module says which processes it can reach. For each peer the BML keeps
//! the modules of highest exclusivity (so the own process goes through `self` only, and node-local
//! peers through shared memory rather than TCP), an eager list ordered by latency (small messages
//! and control fragments take its first route), and a send list for the fragments of large
//! messages.
//!
//! Striping. For each large message the BML plans which send routes carry it ([`Bml::stripe`]):
//! it estimates the time of the remaining bytes on each candidate set of routes — every single
//! route, and the `k` fastest together, as `max latency + bytes / sum of bandwidths` — and takes
//! the quickest, so striping is used exactly where it pays and a slow second network never slows
//! a medium message down (the weakness of the naive scheduler in Open MPI's heterogeneity paper).
//! The plan gives each chosen route a share of the bytes such that all of them finish at the same
//! time (in proportion to bandwidth when latencies are equal; a route that starts later gets
//! less), and drops a route whose share would be under [`MIN_SHARE`]. The PML then hands out
//! fragments in turns (the route that would start sending next comes first), each no larger than
//! what is left of its route's share: the shares hold however large a module's fragments are
//! (tcp's are 512 KiB, half a 1 MiB message) and when one route is momentarily full, which then
//! waits rather than pushing its bytes onto the other. `bml_stripe` can force `always` (every
//! route, shares by bandwidth alone) or `never` (the one route of the best estimated time).

use core::sync::atomic::{AtomicU32, Ordering};

use heapless::Vec;

use crate::arena::{Arena, Sizer};
use crate::btl::{AreaState, Btl, BtlAttrs, BtlFlags, Endpoint, Modex, PeerInfo, Sink};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::params::{Default, Kind, ParamDef};
use crate::rte::ProcId;

/// `bml_stripe`.
pub static STRIPE: ParamDef = ParamDef {
    name: "bml_stripe",
    kind: Kind::Str,
    default: Default::Str("auto"),
    description: "Spreading a large message over a peer's routes: auto (where it pays by estimated time), always, never",
};

/// Parameters of the BML.
pub static PARAMS: [&ParamDef; 1] = [&STRIPE];

/// Whether large messages are spread over several routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StripePolicy {
    /// Where the estimated time says it pays.
    Auto,
    /// Over every send route, in proportion to bandwidth.
    Always,
    /// Over the one route with the best estimated time.
    Never,
}

impl StripePolicy {
    /// Parses the `bml_stripe` parameter.
    pub fn parse(text: &str) -> Option<StripePolicy> {
        match text.trim() {
            "auto" => Some(StripePolicy::Auto),
            "always" => Some(StripePolicy::Always),
            "never" => Some(StripePolicy::Never),
            _ => None,
        }
    }
}

/// One route of a message's plan, with its share of the bytes and what it has taken so far.
#[derive(Clone, Copy, Debug)]
struct Lane {
    route: Route,
    mbps: u32,
    latency_ns: u32,
    /// Bytes of the message planned for this route.
    share: u64,
    /// Bytes it has taken.
    assigned: u64,
}

impl Lane {
    /// Bytes of its share not taken yet.
    fn left(&self) -> u64 {
        self.share.saturating_sub(self.assigned)
    }
}

/// Which routes carry one message's fragments, how many bytes each is to take, and how many
/// each has taken so far.
#[derive(Clone, Debug, Default)]
pub struct Stripe {
    lanes: Vec<Lane, MAX_ROUTES>,
}

/// A lane with less than this left of its share counts as done (fragments that end on element
/// boundaries may leave a few bytes of a share untaken; they go with another lane's fragment).
const SLACK: u64 = 64;

/// The least share a second route is given: below it, a fragment's fixed costs (a frame, a
/// system call, a completion, perhaps a connection) outweigh what it saves.
pub const MIN_SHARE: u64 = 4096;

/// Nanoseconds to move `bytes` at `mbps` Mbit/s.
fn wire_ns(bytes: u64, mbps: u32) -> u64 {
    (bytes as u128 * 8_000 / mbps.max(1) as u128) as u64
}

impl Stripe {
    /// Whether the plan is not made yet.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// The lanes to try for the next fragment, best first, each with the most bytes it should
    /// carry; `remaining` is what the message has left to send.
    ///
    /// A lane takes only its share, so that all lanes finish together however large the
    /// modules' fragments are (a whole 512 KiB fragment too many on the slower route of a 1 MiB
    /// message would make it finish a third later than the other). Among lanes with share left,
    /// the one that would start sending its next fragment first comes first (the slower of two
    /// that would start together), so every lane gets its first fragment at once and they take
    /// turns by bandwidth. When no lane has share left (the slack of element boundaries), every
    /// lane may take the rest.
    pub fn next(&self, remaining: u64) -> Vec<(usize, u64), MAX_ROUTES> {
        let open = self.lanes.iter().any(|l| l.left() >= SLACK);
        let mut order: Vec<(usize, u64), MAX_ROUTES> = Vec::new();
        for (i, l) in self.lanes.iter().enumerate() {
            if !open {
                let _ = order.push((i, remaining));
            } else if l.left() >= SLACK {
                let _ = order.push((i, l.left().min(remaining)));
            }
        }
        // When each lane would start sending the next fragment; among lanes that would start
        // together (at first, all of them), the slowest first. Its share is the smallest, so
        // its first write is short, and the first write is the one a sender gets through at
        // once: later ones can be held up while the kernel moves the bytes already written
        // (on Linux the sending core does the protocol work of the packets that leave, and a
        // shaped link paces them), so the large share goes last rather than keeping the small
        // one from its link.
        order.sort_unstable_by_key(|&(i, _)| {
            let l = &self.lanes[i];
            (l.latency_ns as u64 + wire_ns(l.assigned, l.mbps), l.mbps, i)
        });
        order
    }

    /// The route of lane `i`.
    pub fn route(&self, i: usize) -> Route {
        self.lanes[i].route
    }

    /// Records that lane `i` took `bytes`.
    pub fn account(&mut self, i: usize, bytes: usize) {
        self.lanes[i].assigned += bytes as u64;
    }

    /// Bytes each lane took, in plan order (for tests and tools).
    pub fn assigned(&self) -> impl Iterator<Item = (Route, u64)> + '_ {
        self.lanes.iter().map(|l| (l.route, l.assigned))
    }

    /// Bytes planned for each lane, in plan order (for tests and tools).
    pub fn shares(&self) -> impl Iterator<Item = (Route, u64)> + '_ {
        self.lanes.iter().map(|l| (l.route, l.share))
    }

    /// Plans `bytes` over `routes` (given as route, bandwidth in Mbit/s, latency in ns) by
    /// `policy`: the pure part of [`Bml::stripe`].
    pub fn plan(routes: &[(Route, u32, u32)], bytes: u64, policy: StripePolicy) -> Stripe {
        let mut all: Vec<Lane, MAX_ROUTES> = Vec::new();
        for &(route, mbps, latency_ns) in routes {
            let _ = all.push(Lane {
                route,
                mbps: mbps.max(1),
                latency_ns,
                share: 0,
                assigned: 0,
            });
        }
        let mut lanes = match policy {
            _ if all.len() <= 1 => all,
            StripePolicy::Always => all,
            StripePolicy::Never | StripePolicy::Auto => choose(&all, bytes, policy),
        };
        share(&mut lanes, bytes, policy == StripePolicy::Always);
        Stripe { lanes }
    }
}

/// The quickest set of lanes for `bytes` by estimated time: each lane alone, and (`Auto`) the
/// `k` highest-bandwidth lanes together, a set taking `max latency + bytes / sum of bandwidths`.
/// The estimate charges every lane of a set the slowest one's latency, so a distant route joins
/// only where it clearly pays.
fn choose(all: &[Lane], bytes: u64, policy: StripePolicy) -> Vec<Lane, MAX_ROUTES> {
    let time = |set: &[Lane]| {
        let mbps: u32 = set.iter().map(|l| l.mbps).sum();
        let lat = set.iter().map(|l| l.latency_ns).max().unwrap_or(0) as u64;
        lat + wire_ns(bytes, mbps)
    };
    let mut best: Vec<Lane, MAX_ROUTES> = Vec::new();
    let mut best_t = u64::MAX;
    for l in all {
        let t = time(core::slice::from_ref(l));
        if t < best_t {
            best_t = t;
            best.clear();
            let _ = best.push(*l);
        }
    }
    if policy == StripePolicy::Auto {
        let mut by_bw: Vec<Lane, MAX_ROUTES> = Vec::from_slice(all).unwrap_or_default();
        by_bw.sort_unstable_by_key(|l| core::cmp::Reverse(l.mbps));
        for k in 2..=by_bw.len() {
            let t = time(&by_bw[..k]);
            if t < best_t {
                best_t = t;
                best = Vec::from_slice(&by_bw[..k]).unwrap_or_default();
            }
        }
    }
    best
}

/// Gives each lane its share of `bytes`: so that all finish at the same time, lane `i` sending
/// from its latency `l_i` on at its bandwidth `b_i` until `T = (bits + sum l_i b_i) / sum b_i`
/// (`proportional`: shares by bandwidth alone). A lane whose share would be below [`MIN_SHARE`]
/// (or nothing: its latency alone exceeds `T`) is dropped and the rest shared again, except the
/// last one, which takes everything.
fn share(lanes: &mut Vec<Lane, MAX_ROUTES>, bytes: u64, proportional: bool) {
    loop {
        let n = lanes.len();
        if n == 0 {
            return;
        }
        let lat = |l: &Lane| {
            if proportional {
                0
            } else {
                l.latency_ns as u128
            }
        };
        let sum_bw: u128 = lanes.iter().map(|l| l.mbps as u128).sum();
        // Times in ns scaled by 1000 for precision: bits * 1000 / mbps is ns.
        let t = (bytes as u128 * 8_000
            + lanes.iter().map(|l| lat(l) * l.mbps as u128).sum::<u128>())
            / sum_bw;
        let mut given = 0u64;
        for l in lanes.iter_mut() {
            let s = t.saturating_sub(lat(l)) * l.mbps as u128 / 8_000;
            l.share = s.min(bytes as u128) as u64;
            given += l.share;
        }
        // Rounding leaves a few bytes: to the lane with the largest share.
        if let Some(top) = lanes.iter_mut().max_by_key(|l| l.share) {
            top.share += bytes.saturating_sub(given);
        }
        if n == 1 {
            lanes[0].share = bytes;
            return;
        }
        match lanes
            .iter()
            .enumerate()
            .filter(|(_, l)| l.share < MIN_SHARE)
            .min_by_key(|(_, l)| l.share)
        {
            Some((i, _)) => {
                lanes.remove(i);
            }
            None => return,
        }
    }
}

/// Most BTL modules in one process.
pub const MAX_BTLS: usize = 8;
/// Most modules serving one peer.
pub const MAX_ROUTES: usize = 4;

/// One way to reach a peer: a module and its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Index of the module in the BML.
    pub btl: u8,
    /// The module's endpoint for the peer.
    pub ep: Endpoint,
}

/// The routes to one peer.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    /// For eager messages and control fragments, lowest latency first.
    pub eager: Vec<Route, MAX_ROUTES>,
    /// For fragments of large messages, spread by [`Bml::stripe`].
    pub send: Vec<Route, MAX_ROUTES>,
    exclusivity: u32,
}

/// The BTL modules of a process and the routes to every peer.
pub struct Bml {
    btls: Vec<&'static mut dyn Btl, MAX_BTLS>,
    peers: &'static mut [Routes],
    scratch: &'static mut [Option<Endpoint>],
    policy: StripePolicy,
    /// The modules every progress call polls: those that serve at least one peer.
    polled: Vec<u8, MAX_BTLS>,
    /// The position in `polled` the next progress call starts at.
    next_poll: usize,
    /// Progress calls so far; every [`QUIET_POLL_EVERY`]th polls every module.
    calls: u32,
    /// Where the modules polled only on wake ([`BtlFlags::POLL_ON_WAKE`]) raise their bits
    /// (bit `b` for module `b`) when they have work.
    wake: &'static AtomicU32,
}

/// Every how many progress calls the modules that serve no peer are polled too. They can still
/// have work (a connection a peer opens through a module it prefers, the end of a job), but
/// none of the traffic the routes were chosen for, so they stay out of the latency path.
pub const QUIET_POLL_EVERY: u32 = 16;

impl Bml {
    /// Arena bytes for a job of `procs` processes.
    pub fn size(sizer: &mut Sizer, procs: u32) {
        sizer
            .slice::<Routes>(procs as usize)
            .slice::<Option<Endpoint>>(procs as usize)
            .slice::<AtomicU32>(1);
    }

    /// A BML over `btls` for a job of `procs` processes.
    pub fn new(
        btls: Vec<&'static mut dyn Btl, MAX_BTLS>,
        procs: u32,
        policy: StripePolicy,
        arena: &mut Arena,
    ) -> Result<Bml> {
        // Until add_procs says which serve peers, every module.
        let polled = (0..btls.len() as u8).collect();
        Ok(Bml {
            btls,
            peers: arena.slice(procs as usize, |_| Routes::default())?,
            scratch: arena.slice(procs as usize, |_| None)?,
            policy,
            polled,
            next_poll: 0,
            calls: 0,
            wake: arena.one(AtomicU32::new(0))?,
        })
    }

    /// Plans which send routes carry the remaining `bytes` of a message to `proc`, and how many
    /// bytes each (see the module documentation).
    pub fn stripe(&self, proc: ProcId, bytes: u64) -> Stripe {
        let mut routes: Vec<(Route, u32, u32), MAX_ROUTES> = Vec::new();
        if let Some(r) = self.peers.get(proc.0 as usize) {
            for r in &r.send {
                let a = self.btls[r.btl as usize].attrs();
                let _ = routes.push((*r, a.bandwidth_mbps, a.latency_ns));
            }
        }
        Stripe::plan(&routes, bytes, self.policy)
    }

    /// What a rendezvous to `proc` for a message of `bytes` should carry at most, if the
    /// message would be striped (else `None`: as much as the eager route takes).
    ///
    /// Fragments follow the receiver's ACK, and the ACK follows the whole rendezvous fragment;
    /// the data it carries goes over the eager route alone while the other routes wait. So it
    /// carries what the eager route moves in one round trip (`2 x latency x bandwidth`: about
    /// 2 KB for tcp's default 20 us at 400 Mbit/s) instead of up to the eager limit (64 KiB,
    /// 1.3 ms of a 400 Mbit/s link that a striped message would finish in 0.9 ms).
    pub fn rndv_head(&self, proc: ProcId, bytes: u64) -> Option<usize> {
        let routes = self.peers.get(proc.0 as usize)?;
        if routes.send.len() < 2 || self.policy == StripePolicy::Never {
            return None;
        }
        if self.stripe(proc, bytes).lanes.len() < 2 {
            return None;
        }
        let a = self.btls[routes.eager.first()?.btl as usize].attrs();
        Some((2 * a.latency_ns as u64 * a.bandwidth_mbps as u64 / 8_000) as usize)
    }

    /// Asks every module which of `peers` it reaches and builds the routes.
    pub fn add_procs(&mut self, peers: &[PeerInfo], modex: &mut dyn Modex) -> Result<()> {
        self.add(peers, modex, false)
    }

    /// Asks every module which of `peers`, processes of other jobs joining after init, it
    /// reaches ([`Btl::add_later`]) and builds their routes.
    pub fn add_later(&mut self, peers: &[PeerInfo], modex: &mut dyn Modex) -> Result<()> {
        self.add(peers, modex, true)
    }

    /// Forgets the routes to `proc`, a process of another job that no communicator reaches any
    /// more, and lets every module that reached it close its endpoint ([`Btl::del_later`]).
    pub fn del_later(&mut self, proc: ProcId) {
        let Some(routes) = self.peers.get_mut(proc.0 as usize) else {
            return;
        };
        let routes = core::mem::take(routes);
        let mut done = 0u64;
        for r in routes.eager.iter().chain(routes.send.iter()) {
            if done & (1 << (r.btl % 64)) == 0 {
                done |= 1 << (r.btl % 64);
                self.btls[r.btl as usize].del_later(proc, r.ep);
            }
        }
    }

    fn add(&mut self, peers: &[PeerInfo], modex: &mut dyn Modex, later: bool) -> Result<()> {
        let n = peers.len();
        if n > self.scratch.len() {
            return Err(Error::bad_arg("bml: more peers than process slots"));
        }
        for (b, btl) in self.btls.iter_mut().enumerate() {
            let scratch = &mut self.scratch[..n];
            scratch.fill(None);
            if later {
                btl.add_later(peers, modex, scratch)?;
            } else {
                btl.add_procs(peers, modex, scratch)?;
            }
            let attrs = *btl.attrs();
            for (p, ep) in scratch.iter().enumerate() {
                let Some(ep) = *ep else { continue };
                let routes = self
                    .peers
                    .get_mut(peers[p].proc.0 as usize)
                    .ok_or(Error::bad_arg("bml: a process beyond the process slots"))?;
                routes.add(Route { btl: b as u8, ep }, &attrs);
            }
        }
        // Order eager lists by latency, now that all modules are known.
        for routes in self.peers.iter_mut() {
            let btls = &self.btls;
            let mut eager: Vec<Route, MAX_ROUTES> = routes.eager.clone();
            // Lowest latency first; among equals, the fastest link (a 4 KiB eager message still
            // takes its time on the wire).
            eager.sort_unstable_by_key(|r| {
                let a = btls[r.btl as usize].attrs();
                (a.latency_ns, core::cmp::Reverse(a.bandwidth_mbps))
            });
            routes.eager = eager;
        }
        let mut on_wake = 0u32;
        for (b, btl) in self.btls.iter_mut().enumerate() {
            if btl.attrs().flags.contains(BtlFlags::POLL_ON_WAKE) {
                btl.set_wake(self.wake, 1 << b);
                on_wake |= 1 << b;
            }
        }
        self.polled = (0..self.btls.len() as u8)
            .filter(|&b| on_wake & (1 << b) == 0)
            .filter(|&b| {
                self.peers.iter().any(|r| {
                    r.eager
                        .iter()
                        .chain(r.send.iter())
                        .any(|route| route.btl == b)
                })
            })
            .collect();
        self.next_poll = 0;
        Ok(())
    }

    /// Routes to `proc`.
    pub fn routes(&self, proc: ProcId) -> Option<&Routes> {
        self.peers.get(proc.0 as usize)
    }

    /// The route for an eager message or control fragment to `proc`.
    #[inline]
    pub fn eager(&self, proc: ProcId) -> Option<Route> {
        self.peers.get(proc.0 as usize)?.eager.first().copied()
    }

    /// Whether `proc` can be reached at all.
    pub fn reachable(&self, proc: ProcId) -> Result<()> {
        match self.eager(proc) {
            Some(_) => Ok(()),
            None => Err(Error::new(
                ErrorClass::Intern,
                Reason::Unreachable { proc: proc.0 },
            )),
        }
    }

    /// The module with index `b`.
    #[inline]
    pub fn btl(&mut self, b: u8) -> &mut dyn Btl {
        &mut *self.btls[b as usize]
    }

    /// Every module.
    pub fn btls(&self) -> impl Iterator<Item = &dyn Btl> {
        self.btls.iter().map(|b| &**b)
    }

    /// Runs the modules' progress into `sink`, in turn from where the last call stopped, until
    /// one of them does something: returns how much it did, or 0 after all of them had nothing.
    ///
    /// Stopping at the first module that delivered keeps the others' polls (a system call each
    /// for tcp) out of the path of the message just found, so a second network costs the
    /// latency of the first next to nothing. The next call starts at the following module, so
    /// successive calls go round the modules without skipping any: each is polled at least once
    /// in any `n` calls in a row (`n` modules) however busy the others are. Modules that serve
    /// no peer are polled every [`QUIET_POLL_EVERY`]th call only, and those polled on wake
    /// ([`BtlFlags::POLL_ON_WAKE`]) when they raised their bit.
    #[inline]
    pub fn progress(&mut self, sink: &mut dyn Sink) -> usize {
        self.calls = self.calls.wrapping_add(1);
        if self.calls.is_multiple_of(QUIET_POLL_EVERY) && self.polled.len() < self.btls.len() {
            return self.progress_all(sink);
        }
        if self.wake.load(Ordering::Relaxed) != 0 {
            let n = self.progress_woken(sink);
            if n > 0 {
                return n;
            }
        }
        // Round robin from `next_poll`, without divisions: this runs in every wait loop.
        let count = self.polled.len();
        let mut i = self.next_poll;
        for _ in 0..count {
            if i >= count {
                i = 0;
            }
            let n = self.btls[self.polled[i] as usize].progress(sink);
            i += 1;
            if n > 0 {
                self.next_poll = i;
                return n;
            }
        }
        0
    }

    // Out of line: the rare round that includes the quiet modules.
    #[inline(never)]
    fn progress_all(&mut self, sink: &mut dyn Sink) -> usize {
        self.btls.iter_mut().map(|b| b.progress(sink)).sum()
    }

    // Out of line: the rounds after a message to this process. A bit is lowered before its
    // module's poll, so what the module still has after it (work the poll itself gave it, an
    // answer to this process; what its batch left) raises it again.
    #[inline(never)]
    fn progress_woken(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        let mut due = self.wake.swap(0, Ordering::Relaxed);
        while due != 0 {
            let b = due.trailing_zeros();
            due &= due - 1;
            let Some(btl) = self.btls.get_mut(b as usize) else {
                continue;
            };
            n += btl.progress(sink);
        }
        n
    }

    /// The collective area of `proc` (see [`Btl::coll_area`]), through the modules that reach
    /// it; this process's own when `proc` is `me`.
    pub fn coll_area(&mut self, proc: ProcId, me: ProcId) -> AreaState {
        let mut any_pending = false;
        if proc == me {
            for btl in self.btls.iter_mut() {
                match btl.coll_area(None) {
                    AreaState::Mapped(a) => return AreaState::Mapped(a),
                    AreaState::Pending => any_pending = true,
                    AreaState::Absent => {}
                }
            }
        } else if let Some(routes) = self.peers.get(proc.0 as usize) {
            for r in routes.eager.iter() {
                match self.btls[r.btl as usize].coll_area(Some(r.ep)) {
                    AreaState::Mapped(a) => return AreaState::Mapped(a),
                    AreaState::Pending => any_pending = true,
                    AreaState::Absent => {}
                }
            }
        }
        if any_pending {
            AreaState::Pending
        } else {
            AreaState::Absent
        }
    }

    /// Finalizes every module.
    pub fn finalize(&mut self) {
        for btl in self.btls.iter_mut() {
            btl.finalize();
        }
    }
}

impl Routes {
    /// Adds `route` unless a module of higher exclusivity already serves the peer; drops the
    /// routes of lower exclusivity.
    fn add(&mut self, route: Route, attrs: &BtlAttrs) {
        if !self.eager.is_empty() {
            if attrs.exclusivity < self.exclusivity {
                return;
            }
            if attrs.exclusivity > self.exclusivity {
                self.eager.clear();
                self.send.clear();
            }
        }
        self.exclusivity = attrs.exclusivity;
        // A peer served by more than MAX_ROUTES modules keeps the first ones.
        let _ = self.eager.push(route);
        if attrs.flags.contains(BtlFlags::SEND) {
            let _ = self.send.push(route);
        }
    }
}
