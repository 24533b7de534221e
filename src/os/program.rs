//! Finding PROGRAM as execvp(3) would, and reading which architecture its
//! ELF header says it is for.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::os::error::{self, Error};
use crate::os::log::Log;
use crate::os::personality::{Arch, ArchChoice};

/// musl's execvp default when PATH is unset.
const DEFAULT_PATH: &str = "/usr/local/bin:/bin:/usr/bin";

/// The file to execute for `program`: itself if it names a path (has a
/// `/`), else the first executable regular file in PATH. As with execvp, a
/// match that is not executable is used only if nothing better exists, so
/// that exec reports "permission denied" rather than "not found".
pub fn locate(program: &OsStr, path_var: Option<OsString>) -> Result<PathBuf, Error> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path_var = path_var.unwrap_or_else(|| DEFAULT_PATH.into());
    let mut fallback = None;
    for dir in std::env::split_paths(&path_var) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(program);
        let Ok(meta) = std::fs::metadata(&candidate) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if meta.permissions().mode() & 0o111 != 0
            && rustix::fs::access(&candidate, rustix::fs::Access::EXEC_OK).is_ok()
        {
            return Ok(candidate);
        }
        fallback.get_or_insert(candidate);
    }
    fallback.ok_or_else(|| Error::new(&program.display(), &"not found in PATH", error::NOT_FOUND))
}

/// Checks that `path` (PROGRAM as found) can be executed, for a launch
/// that does not exec it itself (`--mode dmtcp`: dmtcp_launch does, after
/// the coordinator is started): 127 if it is not there, 126 if it cannot
/// be run, as an exec failure would be.
pub fn check_executable(path: &Path) -> Result<(), Error> {
    let fail = |errno: rustix::io::Errno, code| {
        Error::new(&path.display(), &crate::os::sys::strerror(errno), code)
    };
    let st = rustix::fs::stat(path).map_err(|e| fail(e, error::NOT_FOUND))?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(fail(rustix::io::Errno::ACCESS, error::CANNOT_EXECUTE));
    }
    rustix::fs::access(path, rustix::fs::Access::EXEC_OK)
        .map_err(|e| fail(e, error::CANNOT_EXECUTE))
}

/// The architecture to run `path` as: the one asked for, or with `auto`
/// the one its ELF header names (ckptrun's own for a script or an
/// unreadable file).
pub fn arch(choice: ArchChoice, path: &Path, log: &Log) -> Arch {
    match choice {
        ArchChoice::X86_64 => Arch::X86_64,
        ArchChoice::I386 => Arch::I386,
        ArchChoice::Auto => elf_arch(path).unwrap_or_else(|| {
            log.info(format_args!(
                "{}: no readable ELF header; assuming {}",
                path.display(),
                Arch::NATIVE.name()
            ));
            Arch::NATIVE
        }),
    }
}

/// The architecture in `path`'s ELF header, or `None` if it is not a
/// readable ELF file (a script, or execute-only).
pub fn elf_arch(path: &Path) -> Option<Arch> {
    let mut header = [0u8; 20];
    read_at(&open(path)?, 0, &mut header)?;
    parse_elf_header(&header)
}

/// `path`, opened to read; None if it cannot be. (rustix rather than
/// std::fs, whose error values bring std's Debug formatting and Unicode
/// tables into the binary: 4 KB, a page of it resident.)
fn open(path: &Path) -> Option<std::os::fd::OwnedFd> {
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC;
    rustix::fs::open(path, flags, rustix::fs::Mode::empty()).ok()
}

/// Fills `buf` from `file` at `offset`; None if the file is shorter or
/// unreadable.
fn read_at(file: &std::os::fd::OwnedFd, offset: u64, buf: &mut [u8]) -> Option<()> {
    let mut len = 0;
    while len < buf.len() {
        match rustix::io::pread(file, &mut buf[len..], offset + len as u64) {
            Ok(0) => return None,
            Ok(n) => len += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    Some(())
}

/// Whether `path` is an ELF program linked statically (no program
/// interpreter, PT_INTERP): nothing can be preloaded into it, as DMTCP
/// must be. `None` if it is not a readable ELF file (a script, say).
pub fn is_static_elf(path: &Path) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    let file = open(path)?;
    let mut h = [0u8; 64];
    read_at(&file, 0, &mut h)?;
    if &h[..4] != b"\x7fELF" || h[5] != 1 {
        return None; // not ELF, or big-endian: not for this machine
    }
    let u16_at = |at: usize| u64::from(u16::from_le_bytes([h[at], h[at + 1]]));
    let (phoff, phentsize, phnum) = match h[4] {
        1 => (
            u64::from(u32::from_le_bytes(h[28..32].try_into().ok()?)),
            u16_at(42),
            u16_at(44),
        ),
        2 => (
            u64::from_le_bytes(h[32..40].try_into().ok()?),
            u16_at(54),
            u16_at(56),
        ),
        _ => return None,
    };
    for i in 0..phnum {
        let mut p_type = [0u8; 4];
        read_at(&file, phoff + i * phentsize, &mut p_type)?;
        if u32::from_le_bytes(p_type) == PT_INTERP {
            return Some(false);
        }
    }
    Some(true)
}

fn parse_elf_header(header: &[u8; 20]) -> Option<Arch> {
    const EM_386: u16 = 3;
    const EM_X86_64: u16 = 62;
    if &header[..4] != b"\x7fELF" {
        return None;
    }
    let machine = match header[5] {
        1 => u16::from_le_bytes([header[18], header[19]]),
        2 => u16::from_be_bytes([header[18], header[19]]),
        _ => return None,
    };
    match (header[4], machine) {
        (1, EM_386) => Some(Arch::I386),
        (2, EM_X86_64) => Some(Arch::X86_64),
        // x32 and other 32-bit ELF files run in a 32-bit personality.
        (1, _) => Some(Arch::I386),
        (2, _) => Some(Arch::X86_64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(class: u8, machine: u16) -> [u8; 20] {
        let mut h = [0u8; 20];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = 1;
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h
    }

    #[test]
    fn tells_a_static_program_from_a_dynamic_one() {
        // ckptrun's own test binary is static (musl); /bin/sh is not.
        let me = std::env::current_exe().unwrap();
        assert_eq!(is_static_elf(&me), Some(true));
        if Path::new("/bin/sh").exists() {
            assert_eq!(is_static_elf(Path::new("/bin/sh")), Some(false));
        }
        assert_eq!(is_static_elf(Path::new("/etc/hostname")), None);
    }

    #[test]
    fn reads_elf_class() {
        assert_eq!(parse_elf_header(&header(1, 3)), Some(Arch::I386));
        assert_eq!(parse_elf_header(&header(2, 62)), Some(Arch::X86_64));
        let mut script = [0u8; 20];
        script[..2].copy_from_slice(b"#!");
        assert_eq!(parse_elf_header(&script), None);
    }

    #[test]
    fn finds_through_path_like_execvp() {
        let found = locate(OsStr::new("sh"), Some("/nonexistent:/bin:/usr/bin".into())).unwrap();
        assert!(found.ends_with("sh"));
        let err = locate(OsStr::new("no-such-program-xyz"), Some("/bin".into())).unwrap_err();
        assert_eq!(err.code, error::NOT_FOUND);
        assert_eq!(locate(OsStr::new("./x"), None).unwrap(), Path::new("./x"));
    }
}
