//! `parallel_region!("name", { body })`: a region around the body.
//!
//! The body is left as written: the tasks a region runs are recorded by the rayon-core hooks
//! that `cargo parprof` builds into the program, wherever the rayon calls are written.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::{Expr, LitStr, Token};

struct Input {
    name: Option<LitStr>,
    body: Expr,
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name = if input.peek(LitStr) && input.peek2(Token![,]) {
            let name: LitStr = input.parse()?;
            input.parse::<Token![,]>()?;
            Some(name)
        } else if input.peek(LitStr) {
            let name: LitStr = input.parse()?;
            if input.is_empty() {
                return Err(syn::Error::new(
                    name.span(),
                    "a region needs a body after its name: `parallel_region!(\"name\", { ... })`",
                ));
            }
            return Err(input.error("expected `,` between the region's name and its body"));
        } else {
            None
        };
        if input.is_empty() {
            return Err(
                input.error("expected the region's body: `parallel_region!(\"name\", { ... })`")
            );
        }
        let body: Expr = input.parse()?;
        if input.peek(Token![,]) {
            input.parse::<Token![,]>()?;
        }
        if !input.is_empty() {
            let hint = if matches!(&body, Expr::Lit(_)) {
                "the region's name must be a string literal: `parallel_region!(\"name\", { ... })`"
            } else {
                "unexpected tokens after the region's body"
            };
            return Err(input.error(hint));
        }
        Ok(Input { name, body })
    }
}

/// The expansion: a block that enters the region, then evaluates the body, whose value is the
/// block's. The guard records the region's end on every way out of the block; its name is
/// hygienic (`Span::mixed_site`), so the body cannot see or shadow it.
pub fn expand(input: TokenStream) -> TokenStream {
    let Input { name, body } = match syn::parse2::<Input>(input) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error(),
    };
    let name = match name {
        Some(name) => quote!(#name),
        None => quote!(::core::concat!(::core::file!(), ":", ::core::line!())),
    };
    // A plain block's statements go into the expansion's block, after the guard: wrapped as a
    // whole, `{ expr }` would draw an "unnecessary braces" warning on the user's code.
    let body = match body {
        Expr::Block(block) if block.attrs.is_empty() && block.label.is_none() => {
            let stmts = block.block.stmts;
            quote!(#(#stmts)*)
        }
        body => quote!(#body),
    };
    let span = Span::mixed_site();
    // The site is a static in a block of its own: items are not hygienic, so in the body's
    // block it would clash with an item of the same name there.
    quote_spanned! {span=>
        {
            let parprof_region = ::parprof_rt::region::enter({
                static PARPROF_REGION: ::parprof_rt::region::Site =
                    ::parprof_rt::region::Site::region(#name, ::core::file!(), ::core::line!());
                &PARPROF_REGION
            });
            #body
        }
    }
}
