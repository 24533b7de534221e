//! What the modes that keep a store (see `store`: self and dmtcp) share
//! of it: the tag its generations carry (each description says `mode
//! self` or `mode dmtcp`; a store 1 generation, an older ckptrun's, names
//! none, and dmtcp mode's are told by their images directory), and what
//! is left of it when the job ends for good.

use crate::os::log::Log;
use crate::run::protocol::Ending;
use crate::store::Store;
use crate::store::generation::{Meta, Tag};

pub const SELF: Tag = Tag {
    name: "self",
    owner,
};

pub const DMTCP: Tag = Tag {
    name: "dmtcp",
    owner,
};

/// The mode that wrote the generation `meta` describes, if known.
fn owner(meta: &Meta) -> Option<&'static str> {
    match meta.get(b"mode") {
        Some(b"self") => Some(SELF.name),
        Some(b"dmtcp") => Some(DMTCP.name),
        Some(_) => None,
        None if meta.get(b"images-dir").is_some() => Some(DMTCP.name),
        None => Some(SELF.name),
    }
}

/// The job's end for good: after a failed end the store's newest
/// generation goes back with the outputs (HTCondor brings it to the
/// submit directory, to look at or to start again from), as after any
/// end with `--return-store`; after a successful one only the outputs
/// do. A checkpoint leaves it as it is.
pub fn at_end(store: &mut Store, ending: Ending, log: &Log) {
    match ending {
        Ending::Checkpoint => {}
        Ending::Success => store.at_end(false, log),
        Ending::Failure => store.at_end(true, log),
    }
}
