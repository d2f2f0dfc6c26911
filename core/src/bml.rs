//! The BTL Management Layer: which modules serve which peer.
//!
//! After the modex every module says which processes it can reach. For each peer the BML keeps
//! the modules of highest exclusivity (so the own process goes through `self` only, and node-local
//! peers through shared memory rather than TCP), an eager list ordered by latency, and a send
//! list for the fragments of large messages, taken in turn.

use heapless::Vec;

use crate::arena::{Arena, Sizer};
use crate::btl::{Btl, BtlAttrs, BtlFlags, Endpoint, Modex, PeerInfo, Sink};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::rte::ProcId;

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
    /// For fragments of large messages, taken in turn.
    pub send: Vec<Route, MAX_ROUTES>,
    exclusivity: u32,
    next_send: u8,
}

/// The BTL modules of a process and the routes to every peer.
pub struct Bml {
    btls: Vec<&'static mut dyn Btl, MAX_BTLS>,
    peers: &'static mut [Routes],
    scratch: &'static mut [Option<Endpoint>],
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
        arena: &mut Arena,
    ) -> Result<Bml> {
        Ok(Bml {
            btls,
            peers: arena.slice(procs as usize, |_| Routes::default())?,
            scratch: arena.slice(procs as usize, |_| None)?,
        })
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
            eager.sort_unstable_by_key(|r| btls[r.btl as usize].attrs().latency_ns);
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

    /// The next route in turn for a large message's fragment to `proc`.
    pub fn next_send(&mut self, proc: ProcId) -> Option<Route> {
        let routes = self.peers.get_mut(proc.0 as usize)?;
        if routes.send.is_empty() {
            return None;
        }
        let i = routes.next_send as usize % routes.send.len();
        routes.next_send = routes.next_send.wrapping_add(1);
        Some(routes.send[i])
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
