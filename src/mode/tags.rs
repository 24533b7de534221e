//! The modes that keep a store (see `store`), as its generations name
//! them: each description says `mode self` or `mode dmtcp`. A store 1
//! generation (an older ckptrun's) names none; dmtcp mode's are told by
//! their images directory.

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
