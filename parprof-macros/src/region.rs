//! `parallel_region!("name", { body })`: a region around the body, whose rayon calls are
//! rewritten to `parprof_rt::region`'s instrumented equivalents.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, ExprCall, ExprMethodCall, LitStr, Token};

/// Methods that make a parallel iterator (rayon's `IntoParallelIterator`,
/// `IntoParallelRefIterator`, `ParallelSlice`, `ParallelString`, `ParallelBridge`, ...): their
/// result is wrapped in `instrument(..)` so that its pieces are recorded as tasks.
const PAR_ITER_METHODS: &[&str] = &[
    "into_par_iter",
    "par_iter",
    "par_iter_mut",
    "par_bridge",
    "par_drain",
    "par_chunks",
    "par_chunks_mut",
    "par_chunks_exact",
    "par_chunks_exact_mut",
    "par_rchunks",
    "par_rchunks_mut",
    "par_rchunks_exact",
    "par_rchunks_exact_mut",
    "par_chunk_by",
    "par_chunk_by_mut",
    "par_windows",
    "par_split",
    "par_split_mut",
    "par_split_inclusive",
    "par_split_inclusive_mut",
    "par_split_terminator",
    "par_split_whitespace",
    "par_split_ascii_whitespace",
    "par_lines",
    "par_chars",
    "par_char_indices",
    "par_bytes",
    "par_encode_utf16",
    "par_matches",
    "par_match_indices",
];

/// Free functions of rayon that have an instrumented equivalent of the same name, and their
/// number of arguments. `spawn` is rewritten only as `rayon::spawn`: a bare `spawn` is too
/// often `std::thread::spawn`.
const FORK_FUNCTIONS: &[(&str, usize, bool)] = &[
    ("join", 2, true),
    ("join_context", 2, true),
    ("scope", 1, true),
    ("spawn", 1, false),
];

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
            return Err(input.error("unexpected tokens after the region's body"));
        }
        Ok(Input { name, body })
    }
}

/// The expansion: a block that enters the region, then evaluates the rewritten body, whose
/// value is the block's. The guard records the region's end on every way out of the block.
pub fn expand(input: TokenStream) -> TokenStream {
    let Input { name, mut body } = match syn::parse2::<Input>(input) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error(),
    };
    Rewriter::default().visit_expr_mut(&mut body);
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
    let span = Span::call_site();
    quote_spanned! {span=>
        {
            static __PARPROF_REGION: ::parprof_rt::region::Site =
                ::parprof_rt::region::Site::region(#name, ::core::file!(), ::core::line!());
            let __parprof_region = ::parprof_rt::region::enter(&__PARPROF_REGION);
            #body
        }
    }
}

/// Rewrites the rayon calls of a region's body. It does not enter nested items (they are
/// separate code) nor macros (a nested `parallel_region!` rewrites its own body; other macros'
/// tokens are not expressions to it).
#[derive(Default)]
struct Rewriter {
    /// The expression about to be visited is an argument of a call.
    argument: bool,
}

impl VisitMut for Rewriter {
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        let argument = std::mem::take(&mut self.argument);
        if let Expr::Macro(_) = expr {
            return;
        }
        // Decided before the children are rewritten, while the receiver chain is as written.
        let wrap = match expr {
            // An iterator passed to a call (`a.par_iter().zip(b.par_iter())`) is driven by the
            // callee together with its receiver: wrapping both would make each leaf two tasks.
            Expr::MethodCall(m) => !argument && is_par_iter(m) && !chain_has_par_iter(&m.receiver),
            _ => false,
        };
        visit_mut::visit_expr_mut(self, expr);
        if wrap {
            let span = expr.span();
            *expr = syn::parse_quote_spanned!(span=> ::parprof_rt::region::instrument(#expr));
        } else if let Some(rewritten) = rewrite_fork(expr) {
            *expr = rewritten;
        }
    }

    fn visit_expr_call_mut(&mut self, call: &mut ExprCall) {
        self.visit_expr_mut(&mut call.func);
        for arg in &mut call.args {
            self.argument = true;
            self.visit_expr_mut(arg);
        }
    }

    fn visit_expr_method_call_mut(&mut self, call: &mut ExprMethodCall) {
        self.visit_expr_mut(&mut call.receiver);
        for arg in &mut call.args {
            self.argument = true;
            self.visit_expr_mut(arg);
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}

    fn visit_macro_mut(&mut self, _: &mut syn::Macro) {}
}

fn is_par_iter(call: &ExprMethodCall) -> bool {
    PAR_ITER_METHODS.iter().any(|m| call.method == m)
}

/// Whether a parallel iterator is made further down a receiver chain (`v.par_iter().map(f)`
/// as the receiver of `.into_par_iter()`): the outer call then must not wrap it again.
fn chain_has_par_iter(mut expr: &Expr) -> bool {
    loop {
        match expr {
            Expr::MethodCall(m) if is_par_iter(m) => return true,
            Expr::MethodCall(m) => expr = &m.receiver,
            Expr::Paren(p) => expr = &p.expr,
            _ => return false,
        }
    }
}

/// `rayon::join(a, b)` → `::parprof_rt::region::join(a, b)` (likewise `join_context`, `scope`,
/// `rayon::spawn`), and `pool.install(op)` → `::parprof_rt::region::install(&pool, op)`.
fn rewrite_fork(expr: &Expr) -> Option<Expr> {
    let span = expr.span();
    match expr {
        Expr::Call(call) => {
            let Expr::Path(path) = &*call.func else {
                return None;
            };
            if path.qself.is_some() {
                return None;
            }
            let segments: Vec<_> = path.path.segments.iter().collect();
            let (last, prefix) = segments.split_last()?;
            let is_rayon = match prefix {
                [] => false,
                [krate] => krate.ident == "rayon" || krate.ident == "rayon_core",
                _ => return None,
            };
            if prefix.iter().any(|s| !s.arguments.is_none()) {
                return None;
            }
            let (_, arity, bare_ok) = FORK_FUNCTIONS
                .iter()
                .find(|(name, ..)| last.ident == name)?;
            if call.args.len() != *arity || !(is_rayon || (prefix.is_empty() && *bare_ok)) {
                return None;
            }
            if prefix.is_empty() && path.path.leading_colon.is_some() {
                // `::join(..)` names a crate called `join`, not rayon's function.
                return None;
            }
            let args = &call.args;
            Some(syn::parse_quote_spanned!(span=> ::parprof_rt::region::#last(#args)))
        }
        Expr::MethodCall(m)
            if m.method == "install" && m.args.len() == 1 && m.turbofish.is_none() =>
        {
            let pool = &m.receiver;
            let op = &m.args[0];
            Some(syn::parse_quote_spanned!(span=> ::parprof_rt::region::install(&(#pool), #op)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(body: TokenStream) -> String {
        let mut expr: Expr = syn::parse2(body).expect("an expression");
        Rewriter::default().visit_expr_mut(&mut expr);
        normalize(quote!(#expr))
    }

    /// Token text without spaces: a token stream prints `||` as `| |` once it went through syn.
    fn normalize(tokens: TokenStream) -> String {
        tokens.to_string().split_whitespace().collect()
    }

    fn same(actual: String, expected: TokenStream) {
        assert_eq!(actual, normalize(expected));
    }

    #[test]
    fn parallel_iterators_are_wrapped_once_per_chain() {
        same(
            rewrite(quote!(v.par_iter().map(|x| x * 2).sum::<u64>())),
            quote!(
                ::parprof_rt::region::instrument(v.par_iter())
                    .map(|x| x * 2)
                    .sum::<u64>()
            ),
        );
        same(
            rewrite(quote!((0..n).into_par_iter().with_min_len(4).for_each(f))),
            quote!(
                ::parprof_rt::region::instrument((0..n).into_par_iter())
                    .with_min_len(4)
                    .for_each(f)
            ),
        );
        // A chain that makes a parallel iterator twice is wrapped at its innermost one only.
        same(
            rewrite(quote!(v.par_chunks(8).map(g).into_par_iter().count())),
            quote!(
                ::parprof_rt::region::instrument(v.par_chunks(8))
                    .map(g)
                    .into_par_iter()
                    .count()
            ),
        );
    }

    #[test]
    fn an_iterator_passed_as_an_argument_is_left_to_the_callee() {
        same(
            rewrite(quote!(a.par_iter().zip(b.par_iter()).for_each(h))),
            quote!(
                ::parprof_rt::region::instrument(a.par_iter())
                    .zip(b.par_iter())
                    .for_each(h)
            ),
        );
    }

    #[test]
    fn closures_are_entered_and_their_calls_rewritten() {
        same(
            rewrite(quote!(
                rows.par_iter()
                    .map(|r| r.par_iter().sum::<f32>())
                    .sum::<f32>()
            )),
            quote!(
                ::parprof_rt::region::instrument(rows.par_iter())
                    .map(|r| ::parprof_rt::region::instrument(r.par_iter()).sum::<f32>())
                    .sum::<f32>()
            ),
        );
    }

    #[test]
    fn fork_functions_become_the_instrumented_ones() {
        same(
            rewrite(quote!(rayon::join(|| a(), || b()))),
            quote!(::parprof_rt::region::join(|| a(), || b())),
        );
        same(
            rewrite(quote!(join(|| a(), || b()))),
            quote!(::parprof_rt::region::join(|| a(), || b())),
        );
        same(
            rewrite(quote!(::rayon::join_context(|c| a(c), |c| b(c)))),
            quote!(::parprof_rt::region::join_context(|c| a(c), |c| b(c))),
        );
        same(
            rewrite(quote!(rayon::scope(|s| {
                s.spawn(|_| work());
            }))),
            quote!(::parprof_rt::region::scope(|s| {
                s.spawn(|_| work());
            })),
        );
        same(
            rewrite(quote!(rayon::spawn(move || work()))),
            quote!(::parprof_rt::region::spawn(move || work())),
        );
        same(
            rewrite(quote!(pool.install(|| v.par_iter().sum::<u64>()))),
            // A string: inside `quote!`, rustfmt would put the closure body in braces.
            syn::parse_str(
                "::parprof_rt::region::install(&(pool), \
                 || ::parprof_rt::region::instrument(v.par_iter()).sum::<u64>())",
            )
            .unwrap(),
        );
    }

    #[test]
    fn other_calls_are_kept() {
        for body in [
            quote!(spawn(|| work())),
            quote!(std::thread::spawn(|| work())),
            quote!(std::thread::scope(|s| work(s))),
            quote!(other::join(a, b)),
            quote!(join(a)),
            quote!(v.join(",")),
            quote!(cargo.install(a, b)),
            quote!(vec![v.par_iter().count()]),
        ] {
            same(rewrite(body.clone()), body);
        }
    }

    #[test]
    fn nested_items_and_regions_are_not_entered() {
        let body = quote!({
            fn helper(v: &[u8]) -> usize {
                v.par_iter().count()
            }
            parallel_region!("inner", { w.par_iter().count() })
        });
        same(rewrite(body.clone()), body);
    }

    #[test]
    fn the_expansion_enters_a_named_or_anonymous_region() {
        let named = normalize(expand(quote!("sum_rows", { v.par_iter().sum::<u64>() })));
        assert!(
            named.contains(r#"Site::region("sum_rows",::core::file!(),::core::line!())"#),
            "{named}"
        );
        assert!(
            named.contains("::parprof_rt::region::enter(&__PARPROF_REGION)"),
            "{named}"
        );
        assert!(
            named.contains("::parprof_rt::region::instrument(v.par_iter())"),
            "{named}"
        );

        let anonymous = normalize(expand(quote!({ 1 + 1 })));
        assert!(
            anonymous.contains(r#"concat!(::core::file!(),":",::core::line!())"#),
            "{anonymous}"
        );
        // A lone string is a body, not a name.
        assert!(normalize(expand(quote!("just a value"))).ends_with("\"justavalue\"}"));
    }

    #[test]
    fn malformed_input_is_a_compile_error() {
        for input in [quote!(), quote!("name",), quote!("name", { 1 } extra)] {
            assert!(normalize(expand(input)).contains("compile_error!"));
        }
    }
}
