//! A file's data compressed into a member, and expanded again, where it
//! pays: each CHUNK of the file one zstd frame (see the `ckptrun-codec`
//! crate), so that a compressed member is a `.zst` stream any zstd reads
//! (`tar -xOf NAME.1 state | zstd -dc`).
//!
//! - Only where it pays: a sample of the file (SAMPLES pieces of SAMPLE
//!   bytes, spread over it) must shrink by a tenth, or one of its pieces
//!   to half, and then the whole file must shrink; otherwise the file is
//!   stored as it is (copied in the kernel: see `writer`). So an
//!   incompressible state moves no more than raw and costs no more to
//!   commit than a copy. `--no-compress` stores every file as it is.
//!   Within a compressed file, a block that does not
//!   shrink is stored raw inside its frame (3 bytes more per 128 KiB):
//!   the noise in a memory image costs next to nothing.
//! - The frames go straight into the archive, behind the member's header:
//!   a commit needs no room beyond the archive's; when two processes
//!   compress a file, the second half's frames take room twice for a
//!   moment, and where that room is refused the first process compresses
//!   the rest itself.
//! - A large file, with two CPUs or more, is compressed by two processes
//!   at once (`compress_shared`), and expanded by two when it is written
//!   into a file (`expand_here`).
//! - Each frame is expanded again as it is made and compared with the
//!   bytes it was made of, before it is written: a flaw in the encoder
//!   cannot reach a generation.
//! - The checksum (XXH3) is over the raw bytes, what the job wrote and
//!   will get back: computed as they are compressed, and again as they
//!   are expanded, by a check or, in a restore, by the copy whose hashes
//!   the check compares (see `store::verify`). A damaged compressed member either
//!   fails to decode or decodes to bytes whose checksum differs: it is
//!   never restored.
//! - Both run in a child beside ckptrun (`Beside`), and its own child
//!   where two processes share a file, each with working memory of its
//!   own (`Region`, some 5 MiB): the supervising process's memory
//!   is not touched, and nothing is allocated on the heap.

use std::os::fd::BorrowedFd;

use ckptrun_codec::{BLOCK, bound, decode, encode};

use crate::os::beside::Beside;
use crate::os::copy::{read_at, write_at};
use crate::os::region::Region;
use crate::store::hash::Hash;

/// The raw bytes of one frame.
const CHUNK: usize = 1 << 20;
/// Below this a file is stored as it is: a child's start costs more than
/// compressing it could save.
const MIN: u64 = 64 << 10;
/// From this on, a tar header needs a `size` record, whose length
/// depends on the size: the writer could not write the header before the
/// data (see `writer`). Such a file is stored as it is.
const MAX: u64 = 0o777_7777_7777;
/// The sample: SAMPLES pieces of SAMPLE bytes, spread over the file (a
/// memory image mixes code, zeros, text and noise).
const SAMPLE: usize = 16 << 10;
const SAMPLES: u64 = 16;

/// Whether a commit compresses the files it stores.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Packing {
    /// Where it pays (the default).
    WherePays,
    /// Never: every file as it is (`--no-compress`).
    Raw,
}

/// How a file goes into a generation.
pub enum Packed {
    /// As zstd frames, `len` bytes of them; `hash` is the raw bytes'.
    Compressed { len: u64, hash: u64 },
    /// As it is: compressing it would not pay.
    AsItIs,
}

/// Whether a file of `len` bytes may be compressed.
pub fn worth_trying(packing: Packing, len: u64) -> bool {
    packing == Packing::WherePays && (MIN..MAX).contains(&len)
}

/// Compresses the first `len` bytes of `from` (a length `worth_trying`)
/// into `into` at `at`, in a child: what it made. `AsItIs` also when no
/// child could do it (the caller then stores the file as it is, over what
/// the child wrote).
pub fn compress(from: BorrowedFd, len: u64, into: BorrowedFd, at: u64) -> Packed {
    let child = Beside::<3>::start(|| {
        Some(match compress_here(from, len, (into, at)) {
            Some((len, hash)) => [1, len, hash],
            None => [0, 0, 0],
        })
    });
    match child.and_then(Beside::result) {
        Some([1, len, hash]) => Packed::Compressed { len, hash },
        _ => Packed::AsItIs,
    }
}

/// `compress`'s child: the compressed length and the raw bytes' hash;
/// none if it does not pay, or fails, or a frame does not expand to the
/// bytes it was made of.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
fn compress_here(from: BorrowedFd, len: u64, (into, at): (BorrowedFd, u64)) -> Option<(u64, u64)> {
    with_coder(|coder| {
        if !pays(&mut coder.encoder, from, len, coder.raw, coder.out)? {
            return None;
        }
        let mut hash = Hash::new();
        let written = compress_shared(coder, from, len, (into, at), &mut hash)?;
        (written < len).then(|| (written, hash.digest()))
    })
}

/// `compress_here`'s frames, `len` bytes of `from` into `into` at `at`:
/// how many bytes they took. A file of SHARED_FROM bytes or more, with
/// two CPUs or more to run on, is compressed by two processes at once:
/// the frames from half the file on by a child of this one, into the
/// archive past the most the frames can take, moved down behind this
/// one's once both have ended well; those before by this one, which then
/// hashes the rest as `from` holds it. The hash is of the whole file, in
/// order, as with one process; if the second half changed between the
/// two reads, it does not match the frames and the generation is found
/// damaged at the next start, never restored (as with a file stored as
/// it is, `writer`; one process would have stored the torn file with a
/// hash that matches it). One process does it all when no second one can
/// be started; when the other gave no answer or its frames could not be
/// moved (a kill, memory refused, no room on the disk or under the file
/// size limit for frames written that far on), this one drops them and
/// compresses the rest itself, as one process does.
fn compress_shared(
    coder: &mut Coder,
    from: BorrowedFd,
    len: u64,
    (into, at): (BorrowedFd, u64),
    hash: &mut Hash,
) -> Option<u64> {
    let half = len / 2 / CHUNK as u64 * CHUNK as u64;
    // Past the most all the frames can take: a frame of CHUNK bytes never
    // takes more than `bound(CHUNK)`, a sixteenth more at most, and the
    // last frame is one of the `len / CHUNK + 1`. So the other's, once
    // moved down behind this one's, never overlap where they were. Up to
    // there the file has a hole (no blocks, where files can be sparse).
    const { assert!(bound(CHUNK) <= CHUNK + CHUNK / 16) };
    let far = at + len + len / 16 + 2 * CHUNK as u64;
    let other = shared(len)
        .then(|| {
            // The child's coder is its copy of this one's.
            Beside::<1>::start(|| {
                compress_run(coder, from, (half, len), (into, far), None).map(|n| [n])
            })
        })
        .flatten();
    let end = if other.is_some() { half } else { len };
    let ours = compress_run(coder, from, (0, end), (into, at), Some(hash));
    let Some(other) = other else {
        return ours;
    };
    // Waited for whatever this one found: none of ours is left writing.
    let theirs = other.result();
    let ours = ours?;
    let moved = theirs.and_then(|[theirs]| {
        rustix::fs::seek(into, rustix::fs::SeekFrom::Start(at + ours)).ok()?;
        crate::os::copy::copy(into, Some(far), into, theirs).ok()?;
        Some(theirs)
    });
    // What lies past the frames goes: where the other's were, or all of
    // them if they could not be moved (the room they took is needed).
    rustix::fs::ftruncate(into, at + ours + moved.unwrap_or(0)).ok()?;
    let rest = match moved {
        Some(theirs) => {
            crate::store::hash::hash_more(hash, from, half, len - half).ok()?;
            theirs
        }
        None => compress_run(coder, from, (half, len), (into, at + ours), Some(hash))?,
    };
    Some(ours + rest)
}

/// Compresses the bytes `start..end` of `from` (frames of CHUNK bytes
/// from `start`, a multiple of CHUNK) into `into` at `at`, each frame
/// expanded again and compared, added to `hash` if given: how many bytes
/// the frames took.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
fn compress_run(
    coder: &mut Coder,
    from: BorrowedFd,
    (start, end): (u64, u64),
    (into, at): (BorrowedFd, u64),
    mut hash: Option<&mut Hash>,
) -> Option<u64> {
    let Coder {
        encoder,
        decoder,
        raw,
        again,
        out,
    } = coder;
    let (mut done, mut written) = (start, 0u64);
    while done < end {
        let n = (end - done).min(CHUNK as u64) as usize;
        read_at(from, &mut raw[..n], done).ok()?;
        if let Some(hash) = hash.as_deref_mut() {
            hash.update(&raw[..n]);
        }
        let framed = encoder.frame(&raw[..n], out)?;
        // A frame that would not give back the very bytes read (a flaw
        // in the encoder) never reaches a generation: the file is then
        // stored as it is.
        let back = decoder.frame(&out[..framed], &mut again[..n]);
        if back != Some(framed) || again[..n] != raw[..n] {
            return None;
        }
        write_at(into, &out[..framed], at + written).ok()?;
        done += n as u64;
        written += framed as u64;
    }
    Some(written)
}

/// The working memory of one process that compresses: the encoder, a
/// decoder to expand each frame again, and their buffers.
struct Coder<'r> {
    encoder: encode::Encoder<'r>,
    decoder: decode::Decoder<'r>,
    raw: &'r mut [u8],
    again: &'r mut [u8],
    out: &'r mut [u8],
}

/// `f` given a `Coder` in working memory of its own (`Region`).
fn with_coder<T>(f: impl FnOnce(&mut Coder) -> Option<T>) -> Option<T> {
    let words = 4 * (encode::TABLE + encode::SEQS);
    let region = Region::map(words + 2 * (BLOCK + CHUNK) + bound(CHUNK) + 64).ok()?;
    let mut coder = Coder {
        encoder: encode::Encoder::new(encode::Work {
            table: region.carve(encode::TABLE)?,
            lits: region.carve(BLOCK)?,
            seqs: region.carve(encode::SEQS)?,
        }),
        decoder: decode::Decoder::new(decode::Work {
            lits: region.carve(BLOCK)?,
        }),
        raw: region.carve::<u8>(CHUNK)?,
        again: region.carve::<u8>(CHUNK)?,
        out: region.carve::<u8>(bound(CHUNK))?,
    };
    f(&mut coder)
}

/// Whether the sample of `from` shrinks by a tenth, or one of its pieces
/// to half: a file that mixes noise with data that compresses (a memory
/// image) is worth compressing, since its noise is stored raw in the
/// frames.
fn pays(
    encoder: &mut encode::Encoder,
    from: BorrowedFd,
    len: u64,
    raw: &mut [u8],
    out: &mut [u8],
) -> Option<bool> {
    let (mut sampled, mut framed, mut halved) = (0u64, 0u64, false);
    for i in 0..SAMPLES {
        let at = (len * i / SAMPLES).min(len.saturating_sub(SAMPLE as u64));
        let n = (len - at).min(SAMPLE as u64) as usize;
        read_at(from, &mut raw[..n], at).ok()?;
        let piece = encoder.frame(&raw[..n], out)?;
        halved |= piece * 2 <= n;
        framed += piece as u64;
        sampled += n as u64;
    }
    Some(halved || framed * 10 <= sampled * 9)
}

/// Below this many raw bytes, a member is expanded by one process: the
/// second one's start would cost more than it saves.
const SHARED_FROM: u64 = 4 * CHUNK as u64;

/// Expands the frames of a compressed member (`stored` bytes at `offset`
/// in `archive`, `raw` bytes once expanded), in a child; writes them
/// into `into` (from its start) if given. The raw bytes' hash; none if
/// the frames are not what the member says they are (damaged), or no
/// child could expand them.
pub fn expand(
    archive: BorrowedFd,
    (offset, stored, raw): (u64, u64, u64),
    into: Option<BorrowedFd>,
) -> Option<u64> {
    let child =
        Beside::<1>::start(|| expand_here(archive, (offset, stored, raw), into).map(|h| [h]));
    child.and_then(Beside::result).map(|[hash]| hash)
}

/// `expand`'s child. A member written into a file, of SHARED_FROM bytes
/// or more, with two CPUs or more to run on, is expanded by two
/// processes at once: the frames from the one that reaches half its raw
/// bytes on by a child of this one, straight into the file; those before
/// by this one, which then hashes the rest as the file holds them, once
/// the other has ended well. The hash is of the whole file, in order, as
/// with one process. One process does it all when no second one can be
/// started, and this one does the other's part again when the other
/// gave no answer (damage, or not: its memory refused, a kill): damage
/// is then found as with one process.
fn expand_here(
    archive: BorrowedFd,
    member: (u64, u64, u64),
    into: Option<BorrowedFd>,
) -> Option<u64> {
    let mut hash = Hash::new();
    let (offset, stored, raw) = member;
    // The other's part, past the first `s` stored and `r` raw bytes.
    let rest = |(s, r): (u64, u64)| (offset + s, stored - s, raw - r);
    let shared = into.filter(|_| shared(raw)).and_then(|into| {
        let (s, r) = halves(archive, member)?;
        let other = Beside::<1>::start(|| {
            expand_run(archive, rest((s, r)), (Some(into), r), None).map(|()| [0])
        })?;
        Some((into, (s, r), other))
    });
    let Some((into, (s, r), other)) = shared else {
        expand_run(archive, member, (into, 0), Some(&mut hash))?;
        return Some(hash.digest());
    };
    let first = expand_run(archive, (offset, s, r), (Some(into), 0), Some(&mut hash));
    // Waited for whatever this one found: none of ours is left writing.
    let theirs = other.result();
    first?;
    if theirs.is_none() {
        expand_run(archive, rest((s, r)), (Some(into), r), None)?;
    }
    crate::store::hash::hash_more(&mut hash, into, r, raw - r).ok()?;
    Some(hash.digest())
}

/// Whether a file of `len` raw bytes is compressed, or expanded, by two
/// processes: SHARED_FROM bytes or more, and two CPUs or more to run on.
#[inline(never)] // One copy for both.
fn shared(len: u64) -> bool {
    len >= SHARED_FROM && crate::os::sys::cpus() > 1
}

/// Where a member's frames split into two runs of about the same raw
/// size: the first run's stored and raw bytes, from the frames' headers
/// alone (a few bytes read for each block). None if the headers are not
/// frames (the expansion by one process then finds the member damaged).
fn halves(archive: BorrowedFd, (offset, stored, raw): (u64, u64, u64)) -> Option<(u64, u64)> {
    let (mut at, mut made) = (0u64, 0u64);
    while made < raw / 2 {
        let from = at;
        let (took, size) = decode::frame_extent(|o, buf| {
            let o = from + o as u64;
            (o + buf.len() as u64 <= stored).then_some(())?;
            read_at(archive, buf, offset + o).ok()
        })?;
        if size > CHUNK {
            return None;
        }
        at += took as u64;
        made += size as u64;
    }
    (at < stored && made < raw).then_some((at, made))
}

/// Expands `stored` bytes of frames at `offset` in `archive` into `raw`
/// bytes, written into the file `into.0` from `into.1` if given, added to
/// `hash` if given: whether they were frames that made exactly `raw`
/// bytes.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
fn expand_run(
    archive: BorrowedFd,
    (offset, stored, raw): (u64, u64, u64),
    (into, to): (Option<BorrowedFd>, u64),
    mut hash: Option<&mut Hash>,
) -> Option<()> {
    let region = Region::map(BLOCK + CHUNK + bound(CHUNK) + 64).ok()?;
    let mut decoder = decode::Decoder::new(decode::Work {
        lits: region.carve(BLOCK)?,
    });
    let chunk = region.carve::<u8>(CHUNK)?;
    let window = region.carve::<u8>(bound(CHUNK))?;
    let (mut read, mut made) = (0u64, 0u64);
    while made < raw {
        let want = (stored - read).min(window.len() as u64) as usize;
        read_at(archive, &mut window[..want], offset + read).ok()?;
        let n = decode::content_size(&window[..want]).filter(|&n| n <= CHUNK)?;
        if made + n as u64 > raw {
            return None;
        }
        let used = decoder.frame(&window[..want], &mut chunk[..n])?;
        if let Some(hash) = hash.as_deref_mut() {
            hash.update(&chunk[..n]);
        }
        if let Some(into) = into {
            write_at(into, &chunk[..n], to + made).ok()?;
        }
        read += used as u64;
        made += n as u64;
    }
    (read == stored).then_some(())
}
