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
//! Each fragment then goes to the route of the plan that would finish it first, which shares the
//! bytes in proportion to bandwidth. `bml_stripe` can force `always` or `never`.

use heapless::Vec;

use crate::arena::{Arena, Sizer};
use crate::btl::{Btl, BtlAttrs, BtlFlags, Endpoint, Modex, PeerInfo, Sink};
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

/// One route of a message's plan, with what it has been given so far.
#[derive(Clone, Copy, Debug)]
struct Lane {
    route: Route,
    mbps: u32,
    latency_ns: u32,
    assigned: u64,
}

/// Which routes carry one message's fragments, and how many bytes each has taken.
#[derive(Clone, Debug, Default)]
pub struct Stripe {
    lanes: Vec<Lane, MAX_ROUTES>,
}

/// Nanoseconds to move `bytes` at `mbps` Mbit/s.
fn wire_ns(bytes: u64, mbps: u32) -> u64 {
    (bytes as u128 * 8_000 / mbps.max(1) as u128) as u64
}

impl Stripe {
    /// Whether the plan is not made yet.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// Lane indices in the order to try for the next fragment of `n` bytes: the one that would
    /// finish it first comes first.
    pub fn order(&self, n: usize) -> Vec<usize, MAX_ROUTES> {
        let mut order: Vec<usize, MAX_ROUTES> = (0..self.lanes.len()).collect();
        let finish = |i: usize| {
            let l = &self.lanes[i];
            l.latency_ns as u64 + wire_ns(l.assigned + n as u64, l.mbps)
        };
        order.sort_unstable_by_key(|&i| finish(i));
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
}

impl Bml {
    /// Arena bytes for a job of `procs` processes.
    pub fn size(sizer: &mut Sizer, procs: u32) {
        sizer
            .slice::<Routes>(procs as usize)
            .slice::<Option<Endpoint>>(procs as usize);
    }

    /// A BML over `btls` for a job of `procs` processes.
    pub fn new(
        btls: Vec<&'static mut dyn Btl, MAX_BTLS>,
        procs: u32,
        policy: StripePolicy,
        arena: &mut Arena,
    ) -> Result<Bml> {
        Ok(Bml {
            btls,
            peers: arena.slice(procs as usize, |_| Routes::default())?,
            scratch: arena.slice(procs as usize, |_| None)?,
            policy,
        })
    }

    /// Plans which send routes carry the remaining `bytes` of a message to `proc`.
    pub fn stripe(&self, proc: ProcId, bytes: u64) -> Stripe {
        let mut all: Vec<Lane, MAX_ROUTES> = Vec::new();
        if let Some(routes) = self.peers.get(proc.0 as usize) {
            for r in &routes.send {
                let a = self.btls[r.btl as usize].attrs();
                let _ = all.push(Lane {
                    route: *r,
                    mbps: a.bandwidth_mbps.max(1),
                    latency_ns: a.latency_ns,
                    assigned: 0,
                });
            }
        }
        if all.len() <= 1 || self.policy == StripePolicy::Always {
            return Stripe { lanes: all };
        }
        // Candidate sets: each route alone, and the k highest-bandwidth routes together.
        let time = |set: &[Lane]| {
            let mbps: u32 = set.iter().map(|l| l.mbps).sum();
            let lat = set.iter().map(|l| l.latency_ns).max().unwrap_or(0) as u64;
            lat + wire_ns(bytes, mbps)
        };
        let mut best: Vec<Lane, MAX_ROUTES> = Vec::new();
        let mut best_t = u64::MAX;
        for l in &all {
            let t = time(core::slice::from_ref(l));
            if t < best_t {
                best_t = t;
                best.clear();
                let _ = best.push(*l);
            }
        }
        if self.policy == StripePolicy::Auto {
            let mut by_bw = all.clone();
            by_bw.sort_unstable_by_key(|l| core::cmp::Reverse(l.mbps));
            for k in 2..=by_bw.len() {
                let t = time(&by_bw[..k]);
                if t < best_t {
                    best_t = t;
                    best = Vec::from_slice(&by_bw[..k]).unwrap_or_default();
                }
            }
        }
        Stripe { lanes: best }
    }

    /// Asks every module which of `peers` it reaches and builds the routes.
    pub fn add_procs(&mut self, peers: &[PeerInfo], modex: &mut dyn Modex) -> Result<()> {
        let n = peers.len();
        for (b, btl) in self.btls.iter_mut().enumerate() {
            let scratch = &mut self.scratch[..n];
            scratch.fill(None);
            btl.add_procs(peers, modex, scratch)?;
            let attrs = *btl.attrs();
            for (p, ep) in scratch.iter().enumerate() {
                let Some(ep) = *ep else { continue };
                let routes = &mut self.peers[peers[p].proc.0 as usize];
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

    /// Runs every module's progress into `sink`.
    pub fn progress(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        for btl in self.btls.iter_mut() {
            n += btl.progress(sink);
        }
        n
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
