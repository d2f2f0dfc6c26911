//! The info assertions a communicator acts on (MPI-4 §7.4.4): `mpi_assert_no_any_source`,
//! `mpi_assert_no_any_tag`, `mpi_assert_allow_overtaking` and `mpi_assert_exact_length`.
//!
//! They are kept as flags on the communicator ([`super::Comm::hints`]) so the receive path
//! reads one byte instead of searching an info object; the info object the user gave is kept
//! beside them (`crate::info::InfoTable`) only for the keys stormpi does not act on.

bitflags::bitflags! {
    /// Assertions in force on a communicator (all clear by default).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct CommHints: u8 {
        /// No receive or probe uses `MPI_ANY_SOURCE`.
        const NO_ANY_SOURCE = 1 << 0;
        /// No receive or probe uses `MPI_ANY_TAG`.
        const NO_ANY_TAG = 1 << 1;
        /// Messages need not be matched in the order they were sent.
        const ALLOW_OVERTAKING = 1 << 2;
        /// Every receive buffer is exactly as long as its message.
        const EXACT_LENGTH = 1 << 3;
    }
}

/// Each assertion's info key, in the order `MPI_Comm_get_info` lists them.
pub const HINT_KEYS: [(&[u8], CommHints); 4] = [
    (b"mpi_assert_no_any_source", CommHints::NO_ANY_SOURCE),
    (b"mpi_assert_no_any_tag", CommHints::NO_ANY_TAG),
    (b"mpi_assert_allow_overtaking", CommHints::ALLOW_OVERTAKING),
    (b"mpi_assert_exact_length", CommHints::EXACT_LENGTH),
];

/// A boolean hint value: "true" or "false" in any case, blanks around ignored; `None` for
/// anything else (a hint may be ignored, so a value not understood leaves the flag as it was).
fn parse_bool(v: &[u8]) -> Option<bool> {
    let v = v.trim_ascii();
    if v.eq_ignore_ascii_case(b"true") {
        Some(true)
    } else if v.eq_ignore_ascii_case(b"false") {
        Some(false)
    } else {
        None
    }
}

impl CommHints {
    /// These flags updated by the hint `key` = `value`: an assertion key with a boolean value
    /// sets or clears its flag; any other key or value changes nothing.
    #[must_use]
    pub fn with(self, key: &[u8], value: &[u8]) -> CommHints {
        let Some(&(_, flag)) = HINT_KEYS.iter().find(|(k, _)| *k == key) else {
            return self;
        };
        match parse_bool(value) {
            Some(true) => self | flag,
            Some(false) => self - flag,
            None => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_set_and_clear_their_flag() {
        let h = CommHints::empty()
            .with(b"mpi_assert_no_any_source", b"true")
            .with(b"mpi_assert_no_any_tag", b" TRUE ")
            .with(b"mpi_assert_exact_length", b"True");
        assert_eq!(
            h,
            CommHints::NO_ANY_SOURCE | CommHints::NO_ANY_TAG | CommHints::EXACT_LENGTH
        );
        let h = h.with(b"mpi_assert_no_any_tag", b"false");
        assert_eq!(h, CommHints::NO_ANY_SOURCE | CommHints::EXACT_LENGTH);
    }

    #[test]
    fn unknown_keys_and_values_change_nothing() {
        let h = CommHints::ALLOW_OVERTAKING;
        assert_eq!(h.with(b"mpi_assert_no_any_source", b"yes"), h);
        assert_eq!(h.with(b"mpi_assert_allow_overtaking", b""), h);
        assert_eq!(h.with(b"no_locks", b"true"), h);
        assert_eq!(h.with(b"MPI_ASSERT_NO_ANY_TAG", b"true"), h);
    }
}
