//! Procedural macros of parprof. Use them through `parprof_rt`, which re-exports them: the
//! generated code calls into `::parprof_rt`.
use proc_macro::TokenStream;

mod probe;

/// `#[probe]`: its documentation, with examples tested there, is `parprof_rt::probe`'s (this
/// crate is used through `parprof_rt`'s re-export, and its examples need the runtime).
#[proc_macro_attribute]
pub fn probe(attr: TokenStream, item: TokenStream) -> TokenStream {
    probe::expand(attr.into(), item.into()).into()
}

mod region;

/// `parallel_region!`: its documentation, with examples tested there, is
/// `parprof_rt::parallel_region`'s.
#[proc_macro]
pub fn parallel_region(input: TokenStream) -> TokenStream {
    region::expand(input.into()).into()
}
