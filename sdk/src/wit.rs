//! The generated modules under stable names: wit-bindgen puts the version into each module's
//! name once two versions of `ctxhost:engine` meet (0.4 includes 0.3's and 0.2's interfaces).

pub(crate) use crate::bindings::ctxhost::engine0_2_0::{host, types};
pub(crate) use crate::bindings::ctxhost::engine0_3_0::recall;
pub(crate) use crate::bindings::exports::ctxhost::engine0_2_0::engine;
pub(crate) use crate::bindings::exports::ctxhost::engine0_3_0::tools;
pub(crate) use crate::bindings::exports::ctxhost::engine0_4_0::incremental;
