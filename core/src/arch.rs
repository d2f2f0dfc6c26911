//! The 32-bit architecture descriptor.
//!
//! Every process computes one integer that says how its data looks in memory — byte order, the
//! width of `long`, C `bool` and Fortran `LOGICAL`, the format of `long double` — and publishes it
//! in the modex. Two peers with equal descriptors never run heterogeneous code: one compare decides.
//!
//! Layout (Open MPI's table, bytes numbered from the most significant, bit pairs from the top):
//!
//! | bits  | meaning                                                                 |
//! |-------|-------------------------------------------------------------------------|
//! | 31-30 | always `00` (marker)                                                    |
//! | 29-28 | byte order: `00` little, `01` big                                       |
//! | 27-24 | reserved, `0000`                                                        |
//! | 23-22 | `long`: `00` 32 bits, `01` 64 bits                                      |
//! | 21-20 | reserved for `long long`, `00`                                          |
//! | 19-18 | C `bool`: `00` 8, `01` 16, `10` 32 bits                                 |
//! | 17-16 | Fortran `LOGICAL`: `00` 8, `01` 16, `10` 32 bits                        |
//! | 15-14 | `long double` storage: `00` 64, `01` 96, `10` 128 bits                  |
//! | 13-12 | `long double` exponent: `00` 11, `01` 15 bits                           |
//! | 11-9  | `long double` mantissa: 53, 64, 105, 106, 107, 113 bits (`000`..`101`)  |
//! | 8     | mantissa representation: `1` Intel (explicit integer bit), `0` other    |
//! | 7-0   | always `11111111` (marker)                                              |
//!
//! The markers make the descriptor's own byte order recognisable: read backwards, the top byte is
//! `0xff`.

use core::fmt;

const MARK_HIGH_MASK: u32 = 0xc000_0000;
const MARK_LOW: u32 = 0x0000_00ff;
const RESERVED_MASK: u32 = 0x0f30_0000;
const ENDIAN_SHIFT: u32 = 28;
const LONG_SHIFT: u32 = 22;
const BOOL_SHIFT: u32 = 18;
const LOGICAL_SHIFT: u32 = 16;
const LD_STORAGE_SHIFT: u32 = 14;
const LD_EXP_SHIFT: u32 = 12;
const LD_MANT_SHIFT: u32 = 9;
const LD_INTEL_BIT: u32 = 1 << 8;

/// Byte order of a process's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    /// Least significant byte first.
    Little,
    /// Most significant byte first (network order).
    Big,
}

impl Endian {
    /// This machine's byte order.
    pub const NATIVE: Endian = if cfg!(target_endian = "big") {
        Endian::Big
    } else {
        Endian::Little
    };
}

/// The format of C `long double`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongDouble {
    /// Bytes of storage (8, 12 or 16).
    pub storage_bytes: u8,
    /// Exponent bits (11 or 15).
    pub exponent_bits: u8,
    /// Mantissa bits (53, 64, 105, 106, 107 or 113).
    pub mantissa_bits: u8,
    /// Intel's extended format, with an explicit integer bit.
    pub intel: bool,
}

/// The decoded meaning of a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchInfo {
    /// Byte order.
    pub endian: Endian,
    /// Bytes in a C `long` (4 or 8).
    pub long_bytes: u8,
    /// Bytes in a C `bool` (1, 2 or 4).
    pub bool_bytes: u8,
    /// Bytes in a Fortran `LOGICAL` (1, 2 or 4).
    pub logical_bytes: u8,
    /// Format of `long double`.
    pub long_double: LongDouble,
}

/// A descriptor that does not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchError {
    /// The descriptor was read in the wrong byte order.
    ByteSwapped(u32),
    /// Marker bits or reserved bits are wrong, or a field holds an unassigned code.
    Malformed(u32),
}

impl fmt::Display for ArchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchError::ByteSwapped(v) => {
                write!(f, "architecture descriptor {v:#010x} is byte-swapped")
            }
            ArchError::Malformed(v) => write!(f, "architecture descriptor {v:#010x} is malformed"),
        }
    }
}

/// A validated 32-bit architecture descriptor.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arch(u32);

// The local architecture must have a descriptor: checked when the crate is built.
const _: () = assert!(
    Arch::from_raw(Arch::LOCAL.0).is_ok(),
    "local architecture does not encode"
);

impl fmt::Debug for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Arch({:#010x})", self.0)
    }
}

const fn size_code(bytes: u8) -> Option<u32> {
    match bytes {
        1 => Some(0),
        2 => Some(1),
        4 => Some(2),
        _ => None,
    }
}

const fn size_from_code(code: u32) -> Option<u8> {
    match code {
        0 => Some(1),
        1 => Some(2),
        2 => Some(4),
        _ => None,
    }
}

const MANTISSAS: [u8; 6] = [53, 64, 105, 106, 107, 113];

impl Arch {
    /// This process's descriptor, computed from the target it was built for.
    pub const LOCAL: Arch = match Arch::encode(&ArchInfo::LOCAL) {
        Some(a) => a,
        // Invalid, so the build fails (below) rather than a process running with it.
        None => Arch(0),
    };

    /// Encodes `info`; `None` if a field has no code in the descriptor.
    pub const fn encode(info: &ArchInfo) -> Option<Arch> {
        let endian = match info.endian {
            Endian::Little => 0,
            Endian::Big => 1,
        };
        let long = match info.long_bytes {
            4 => 0,
            8 => 1,
            _ => return None,
        };
        let (Some(boolean), Some(logical)) =
            (size_code(info.bool_bytes), size_code(info.logical_bytes))
        else {
            return None;
        };
        let ld = &info.long_double;
        let storage = match ld.storage_bytes {
            8 => 0,
            12 => 1,
            16 => 2,
            _ => return None,
        };
        let exp = match ld.exponent_bits {
            11 => 0,
            15 => 1,
            _ => return None,
        };
        let mut mant = 0;
        while mant < MANTISSAS.len() {
            if MANTISSAS[mant] == ld.mantissa_bits {
                break;
            }
            mant += 1;
        }
        if mant == MANTISSAS.len() {
            return None;
        }
        let mut v = MARK_LOW;
        v |= endian << ENDIAN_SHIFT;
        v |= long << LONG_SHIFT;
        v |= boolean << BOOL_SHIFT;
        v |= logical << LOGICAL_SHIFT;
        v |= storage << LD_STORAGE_SHIFT;
        v |= exp << LD_EXP_SHIFT;
        v |= (mant as u32) << LD_MANT_SHIFT;
        if ld.intel {
            v |= LD_INTEL_BIT;
        }
        Some(Arch(v))
    }

    /// Validates a raw descriptor (in this process's integer order).
    pub const fn from_raw(v: u32) -> Result<Arch, ArchError> {
        if v & MARK_HIGH_MASK != 0 || v & MARK_LOW != MARK_LOW {
            if v.swap_bytes() & MARK_HIGH_MASK == 0 && v.swap_bytes() & MARK_LOW == MARK_LOW {
                return Err(ArchError::ByteSwapped(v));
            }
            return Err(ArchError::Malformed(v));
        }
        let a = Arch(v);
        if v & RESERVED_MASK != 0 || (v >> ENDIAN_SHIFT) & 3 > 1 || (v >> LONG_SHIFT) & 3 > 1 {
            return Err(ArchError::Malformed(v));
        }
        if a.decode().is_none() {
            return Err(ArchError::Malformed(v));
        }
        Ok(a)
    }

    /// The descriptor as published in the modex: network byte order.
    pub const fn to_wire(self) -> [u8; 4] {
        self.0.to_be_bytes()
    }

    /// Parses a descriptor published in the modex.
    pub const fn from_wire(bytes: [u8; 4]) -> Result<Arch, ArchError> {
        Arch::from_raw(u32::from_be_bytes(bytes))
    }

    /// The raw 32-bit value.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// Byte order of this architecture's data.
    pub const fn endian(self) -> Endian {
        if (self.0 >> ENDIAN_SHIFT) & 3 == 1 {
            Endian::Big
        } else {
            Endian::Little
        }
    }

    /// Decodes every field. Always `Some` for a validated descriptor.
    pub const fn decode(self) -> Option<ArchInfo> {
        let v = self.0;
        let long_bytes = if (v >> LONG_SHIFT) & 3 == 1 { 8 } else { 4 };
        let (Some(bool_bytes), Some(logical_bytes)) = (
            size_from_code((v >> BOOL_SHIFT) & 3),
            size_from_code((v >> LOGICAL_SHIFT) & 3),
        ) else {
            return None;
        };
        let storage_bytes = match (v >> LD_STORAGE_SHIFT) & 3 {
            0 => 8,
            1 => 12,
            2 => 16,
            _ => return None,
        };
        let exponent_bits = match (v >> LD_EXP_SHIFT) & 3 {
            0 => 11,
            1 => 15,
            _ => return None,
        };
        let mant = ((v >> LD_MANT_SHIFT) & 7) as usize;
        if mant >= MANTISSAS.len() {
            return None;
        }
        Some(ArchInfo {
            endian: self.endian(),
            long_bytes,
            bool_bytes,
            logical_bytes,
            long_double: LongDouble {
                storage_bytes,
                exponent_bits,
                mantissa_bits: MANTISSAS[mant],
                intel: v & LD_INTEL_BIT != 0,
            },
        })
    }

    /// Whether data from `other` needs no conversion here. One integer compare.
    #[inline]
    pub const fn same_as(self, other: Arch) -> bool {
        self.0 == other.0
    }
}

impl ArchInfo {
    /// The architecture this crate was compiled for.
    pub const LOCAL: ArchInfo = ArchInfo {
        endian: Endian::NATIVE,
        long_bytes: core::mem::size_of::<core::ffi::c_long>() as u8,
        bool_bytes: core::mem::size_of::<bool>() as u8,
        // gfortran's default LOGICAL kind is 4 bytes on every target stormpi builds for.
        logical_bytes: 4,
        long_double: LOCAL_LONG_DOUBLE,
    };
}

// Rust has no `long double`; its format is a fact of the target's C ABI.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
const LOCAL_LONG_DOUBLE: LongDouble = LongDouble {
    storage_bytes: if cfg!(target_arch = "x86") { 12 } else { 16 },
    exponent_bits: 15,
    mantissa_bits: 64,
    intel: true,
};
#[cfg(any(target_arch = "powerpc64", target_arch = "powerpc"))]
const LOCAL_LONG_DOUBLE: LongDouble = LongDouble {
    storage_bytes: 16,
    exponent_bits: 11,
    mantissa_bits: 106,
    intel: false,
};
#[cfg(any(target_arch = "arm", target_arch = "riscv32"))]
const LOCAL_LONG_DOUBLE: LongDouble = LongDouble {
    storage_bytes: 8,
    exponent_bits: 11,
    mantissa_bits: 53,
    intel: false,
};
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "powerpc64",
    target_arch = "powerpc",
    target_arch = "arm",
    target_arch = "riscv32"
)))]
const LOCAL_LONG_DOUBLE: LongDouble = LongDouble {
    // aarch64, s390x, riscv64 Linux: IEEE binary128.
    storage_bytes: 16,
    exponent_bits: 15,
    mantissa_bits: 113,
    intel: false,
};

#[cfg(test)]
mod tests {
    use super::*;

    const X86_64: ArchInfo = ArchInfo {
        endian: Endian::Little,
        long_bytes: 8,
        bool_bytes: 1,
        logical_bytes: 4,
        long_double: LongDouble {
            storage_bytes: 16,
            exponent_bits: 15,
            mantissa_bits: 64,
            intel: true,
        },
    };

    #[test]
    fn x86_64_descriptor_has_known_value() {
        // 00 00 0000 | 01 00 00 10 | 10 01 001 1 | 11111111
        let a = Arch::encode(&X86_64).unwrap();
        assert_eq!(a.raw(), 0x0042_93ff);
        assert_eq!(a.decode(), Some(X86_64));
    }

    #[test]
    fn local_descriptor_round_trips() {
        let a = Arch::LOCAL;
        assert_eq!(Arch::from_raw(a.raw()), Ok(a));
        assert_eq!(Arch::from_wire(a.to_wire()), Ok(a));
        assert_eq!(a.decode(), Some(ArchInfo::LOCAL));
        assert_eq!(a.endian(), Endian::NATIVE);
    }

    #[test]
    fn byte_swapped_descriptor_is_recognised() {
        let a = Arch::encode(&X86_64).unwrap();
        assert_eq!(
            Arch::from_raw(a.raw().swap_bytes()),
            Err(ArchError::ByteSwapped(a.raw().swap_bytes()))
        );
    }

    #[test]
    fn malformed_descriptors_are_rejected() {
        assert!(matches!(Arch::from_raw(0), Err(ArchError::Malformed(_))));
        // reserved bits set
        assert!(Arch::from_raw(0x0f42_93ff).is_err());
        // mantissa code 7 unassigned
        assert!(Arch::from_raw(0x0042_9fff).is_err());
        // bool code 3 unassigned
        assert!(Arch::from_raw(0x004e_93ff).is_err());
    }

    #[test]
    fn big_endian_32bit_long_differs_by_one_compare() {
        let s390x = ArchInfo {
            endian: Endian::Big,
            long_double: LongDouble {
                storage_bytes: 16,
                exponent_bits: 15,
                mantissa_bits: 113,
                intel: false,
            },
            ..X86_64
        };
        let i686 = ArchInfo {
            long_bytes: 4,
            long_double: LongDouble {
                storage_bytes: 12,
                ..X86_64.long_double
            },
            ..X86_64
        };
        let a = Arch::encode(&X86_64).unwrap();
        let b = Arch::encode(&s390x).unwrap();
        let c = Arch::encode(&i686).unwrap();
        assert!(!a.same_as(b) && !a.same_as(c) && a.same_as(a));
        assert_eq!(b.endian(), Endian::Big);
        assert_eq!(c.decode().unwrap().long_bytes, 4);
        assert_eq!(Arch::from_wire(b.to_wire()), Ok(b));
    }
}
