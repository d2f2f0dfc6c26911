//! stormpi-bootstrap: launcher, PMI server and clients.
