//! The execution domain a condor_compile'd job needs: what
//! `setarch ARCH -L -B -R` gives, set with personality(2) directly so that
//! no setarch is needed on the execute node.

use rustix::io::Errno;

use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::sys;

/// setarch -R: no address space randomization.
pub const ADDR_NO_RANDOMIZE: u32 = 0x0040000;
/// setarch -L: the legacy (bottom-up) mmap layout.
pub const ADDR_COMPAT_LAYOUT: u32 = 0x0200000;
/// setarch -B: limit the address space to 32 bits.
pub const ADDR_LIMIT_32BIT: u32 = 0x0800000;
/// setarch i386: the 32-bit Linux execution domain.
pub const PER_LINUX32: u32 = 0x0008;
/// personality(2) with this value only reads the current one.
const QUERY: u32 = 0xffff_ffff;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    I386,
}

impl Arch {
    /// The architecture ckptrun itself was built for, used when PROGRAM is
    /// not an ELF file it can read (a script, say).
    pub const NATIVE: Arch = if cfg!(target_pointer_width = "32") {
        Arch::I386
    } else {
        Arch::X86_64
    };

    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::I386 => "i386",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchChoice {
    Auto,
    X86_64,
    I386,
}

/// Which of setarch's -R, -L, -B to apply.
#[derive(Clone, Copy, Debug)]
pub struct Flags {
    pub no_randomize: bool,
    pub compat_layout: bool,
    pub limit_32bit: bool,
}

/// The personality value for `arch` with `flags`: 0x00a40000 for x86_64
/// with all three, 0x00a40008 for i386.
pub fn persona(arch: Arch, flags: Flags) -> u32 {
    let base = match arch {
        Arch::X86_64 => 0,
        Arch::I386 => PER_LINUX32,
    };
    let bit = |on: bool, value: u32| if on { value } else { 0 };
    base | bit(flags.no_randomize, ADDR_NO_RANDOMIZE)
        | bit(flags.compat_layout, ADDR_COMPAT_LAYOUT)
        | bit(flags.limit_32bit, ADDR_LIMIT_32BIT)
}

/// Sets `value` for ckptrun (the job inherits it across fork and exec)
/// and reads it back. A refusal is fatal unless `optional`.
pub fn apply(value: u32, optional: bool, log: &Log) -> Result<(), Error> {
    let what = format!("personality(0x{value:08x})");
    let refused = match sys::personality(value) {
        Err(errno) => Some(format!(
            "{}: the kernel or a seccomp filter (Docker's default profile) forbids it; \
             run the container with --security-opt seccomp=unconfined, \
             or pass --personality-optional to run with address randomization",
            sys::strerror(Errno::from_raw_os_error(errno))
        )),
        Ok(_) => match sys::personality(QUERY) {
            Ok(now) if now == value => None,
            Ok(now) => Some(format!("the kernel kept 0x{now:08x}")),
            Err(errno) => Some(format!(
                "cannot read it back: {}",
                sys::strerror(Errno::from_raw_os_error(errno))
            )),
        },
    };
    match refused {
        None => {
            log.info(format_args!("{what}: set"));
            Ok(())
        }
        Some(why) if optional => {
            log.warn(format_args!(
                "{what}: {why}; running anyway (--personality-optional)"
            ));
            Ok(())
        }
        Some(why) => Err(Error::usage(what, why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Flags = Flags {
        no_randomize: true,
        compat_layout: true,
        limit_32bit: true,
    };

    #[test]
    fn values_match_setarch() {
        assert_eq!(persona(Arch::X86_64, ALL), 0x00a4_0000);
        assert_eq!(persona(Arch::I386, ALL), 0x00a4_0008);
        let no_b = Flags {
            limit_32bit: false,
            ..ALL
        };
        assert_eq!(persona(Arch::X86_64, no_b), 0x0024_0000);
    }
}
