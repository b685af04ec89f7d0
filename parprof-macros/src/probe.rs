//! Expansion of `#[probe]`; the user-facing documentation is on the entry point in `lib.rs`.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{
    Attribute, Block, Error, Expr, Ident, ImplItem, Item, ItemFn, ItemImpl, LitStr, Meta,
    ReturnType, Signature, Stmt, Type,
};

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let parsed = match syn::parse2::<Item>(item.clone()) {
        Ok(parsed) => parsed,
        Err(e) => return with_error(e, item),
    };
    match parsed {
        Item::Fn(f) => {
            let original = f.to_token_stream();
            Args::parse(attr)
                .and_then(|args| probe_fn(args, f))
                .unwrap_or_else(|e| with_error(e, original))
        }
        Item::Impl(imp) => probe_impl(attr, imp),
        other => with_error(unsupported(&other), other.into_token_stream()),
    }
}

/// Emits the item next to the error so that the error is the only one reported, instead of
/// also every use of an item that vanished.
fn with_error(error: Error, item: TokenStream) -> TokenStream {
    let mut out = error.to_compile_error();
    out.extend(item);
    out
}

/// The arguments of one `#[probe(...)]`.
#[derive(Default)]
struct Args {
    name: Option<LitStr>,
    skip: Option<Span>,
}

impl Args {
    fn parse(tokens: TokenStream) -> syn::Result<Args> {
        let mut args = Args::default();
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("name") {
                if args.name.is_some() {
                    return Err(meta.error("`name` is given twice"));
                }
                let name: LitStr = meta.value()?.parse()?;
                if name.value().is_empty() {
                    return Err(Error::new(name.span(), "a probe name must not be empty"));
                }
                args.name = Some(name);
                Ok(())
            } else if meta.path.is_ident("skip") {
                args.skip = Some(meta.path.span());
                Ok(())
            } else {
                Err(meta.error("unknown `#[probe]` argument; expected `name = \"...\"` or `skip`"))
            }
        });
        parser.parse2(tokens)?;
        Ok(args)
    }

    /// The arguments of a `#[probe]` written on a function inside a probed `impl` block.
    fn from_attr(attr: &Attribute) -> syn::Result<Args> {
        match &attr.meta {
            Meta::Path(_) => Ok(Args::default()),
            Meta::List(list) => Args::parse(list.tokens.clone()),
            Meta::NameValue(nv) => Err(Error::new_spanned(
                nv,
                "expected `#[probe]` or `#[probe(...)]`",
            )),
        }
    }
}

/// How the probe of one function is named.
enum SiteName {
    /// Fully known at expansion.
    Fixed(TokenStream),
    /// `module::function`, which the runtime turns into `module::Type::function` from
    /// `type_name::<Self>()`: the macro cannot name `Self` in the site's static.
    OfSelfType(TokenStream),
}

fn probe_fn(args: Args, mut f: ItemFn) -> syn::Result<TokenStream> {
    if let Some(skip) = args.skip {
        return Err(Error::new(
            skip,
            "`skip` excludes a function of a `#[probe]` impl block; \
             to not probe this function, remove `#[probe]`",
        ));
    }
    if let Some(again) = f.attrs.iter().find(|a| is_probe_attr(a)) {
        return Err(Error::new_spanned(
            again,
            "`#[probe]` is given twice on this function",
        ));
    }
    check_probeable(&f.sig, false)?;
    let name = match args.name {
        Some(name) => SiteName::Fixed(name.into_token_stream()),
        None if f.sig.receiver().is_some() => {
            SiteName::OfSelfType(default_name(None, &f.sig.ident))
        }
        None => SiteName::Fixed(default_name(None, &f.sig.ident)),
    };
    instrument(&mut f.block, &f.sig, name);
    Ok(f.into_token_stream())
}

fn probe_impl(attr: TokenStream, mut imp: ItemImpl) -> TokenStream {
    let mut errors = Vec::new();
    match Args::parse(attr) {
        Ok(Args {
            name: Some(name), ..
        }) => errors.push(Error::new(
            name.span(),
            "`name` names a single function; on an impl block, \
             put `#[probe(name = \"...\")]` on the function",
        )),
        Ok(Args {
            skip: Some(skip), ..
        }) => errors.push(Error::new(
            skip,
            "`skip` applies to functions inside a `#[probe]` impl block",
        )),
        Ok(_) => {}
        Err(e) => errors.push(e),
    }
    let type_name = plain_type_name(&imp);
    for item in &mut imp.items {
        let ImplItem::Fn(f) = item else { continue };
        // These attributes are consumed here: left in place they would probe the function a
        // second time (or reject `skip`) when they expand.
        let (probe_attrs, attrs) = std::mem::take(&mut f.attrs)
            .into_iter()
            .partition(is_probe_attr);
        f.attrs = attrs;
        if let Some(extra) = probe_attrs.get(1) {
            errors.push(Error::new_spanned(
                extra,
                "`#[probe]` is given twice on this function",
            ));
            continue;
        }
        let args = match probe_attrs
            .first()
            .map_or_else(|| Ok(Args::default()), Args::from_attr)
        {
            Ok(args) => args,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        if args.skip.is_some() {
            if let Some(name) = args.name {
                errors.push(Error::new(
                    name.span(),
                    "`name` has no effect on a skipped function",
                ));
            }
            continue;
        }
        if let Err(e) = check_probeable(&f.sig, true) {
            errors.push(e);
            continue;
        }
        let name = match (args.name, type_name.as_deref()) {
            (Some(name), _) => SiteName::Fixed(name.into_token_stream()),
            (None, Some(type_name)) => SiteName::Fixed(default_name(Some(type_name), &f.sig.ident)),
            // Every function of an impl block, with or without receiver, can name `Self`.
            (None, None) => SiteName::OfSelfType(default_name(None, &f.sig.ident)),
        };
        instrument(&mut f.block, &f.sig, name);
    }
    let mut out: TokenStream = errors.into_iter().map(|e| e.to_compile_error()).collect();
    imp.to_tokens(&mut out);
    out
}

/// The self type's name when the impl names it by a bare identifier; a longer path would
/// read wrongly after `module_path!()`, and a generic parameter names no type.
fn plain_type_name(imp: &ItemImpl) -> Option<String> {
    let mut ty = &*imp.self_ty;
    // A type passed through a `macro_rules!` `$t:ty` arrives wrapped in an invisible group.
    while let Type::Group(syn::TypeGroup { elem, .. }) | Type::Paren(syn::TypeParen { elem, .. }) =
        ty
    {
        ty = elem;
    }
    let Type::Path(syn::TypePath { qself: None, path }) = ty else {
        return None;
    };
    if path.leading_colon.is_some() || path.segments.len() != 1 {
        return None;
    }
    // Generic arguments are dropped: `Grid<f32>` and `Grid<f64>` share the site anyway.
    let ident = &path.segments[0].ident;
    let is_generic_param = imp.generics.type_params().any(|p| p.ident == *ident);
    (!is_generic_param).then(|| ident.unraw().to_string())
}

/// Whether an attribute is this macro, which then probes the same function a second time.
fn is_probe_attr(attr: &Attribute) -> bool {
    let segments: Vec<String> = attr
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    match segments.as_slice() {
        [name] => name == "probe",
        [krate, name] => (krate == "parprof_rt" || krate == "parprof_macros") && name == "probe",
        _ => false,
    }
}

fn check_probeable(sig: &Signature, in_impl: bool) -> syn::Result<()> {
    let hint = if in_impl {
        "; exclude it from the impl block's probes with `#[probe(skip)]`"
    } else {
        ""
    };
    if let Some(constness) = &sig.constness {
        return Err(Error::new(
            constness.span,
            format!(
                "`#[probe]` cannot be applied to a `const fn`: a probe reads a clock at run time, \
                 which a function evaluated at compile time cannot do{hint}"
            ),
        ));
    }
    if let Some(asyncness) = &sig.asyncness {
        return Err(Error::new(
            asyncness.span,
            format!(
                "`#[probe]` cannot be applied to an `async fn`: its guard would live across `.await` \
                 points and count the time in which the future is not polled; probe the synchronous \
                 functions it calls instead{hint}"
            ),
        ));
    }
    Ok(())
}

fn unsupported(item: &Item) -> Error {
    let message = "`#[probe]` applies to functions and `impl` blocks";
    let ident = match item {
        Item::Trait(i) => {
            return Error::new(
                i.ident.span(),
                format!(
                    "{message}; to probe a trait's methods, \
                     put it on the impl blocks or on the methods with a body"
                ),
            );
        }
        Item::Struct(i) => Some(&i.ident),
        Item::Enum(i) => Some(&i.ident),
        Item::Union(i) => Some(&i.ident),
        Item::Mod(i) => Some(&i.ident),
        Item::Static(i) => Some(&i.ident),
        Item::Const(i) => Some(&i.ident),
        Item::Type(i) => Some(&i.ident),
        _ => None,
    };
    if let Some(ident) = ident {
        return Error::new(ident.span(), message);
    }
    // syn keeps a function declaration without body (trait or extern block) as verbatim tokens.
    let is_declaration = matches!(item, Item::Verbatim(tokens) if syn::parse2::<syn::TraitItemFn>(tokens.clone()).is_ok());
    if is_declaration {
        return Error::new_spanned(
            item,
            "`#[probe]` needs a function body; for a trait method, put it on the implementations",
        );
    }
    Error::new_spanned(item, message)
}

/// `concat!(module_path!(), "::", ["Type", "::",] "function")`.
fn default_name(type_name: Option<&str>, function: &Ident) -> TokenStream {
    let function = function.unraw().to_string();
    let type_part = type_name.map(|t| quote!(#t, "::",));
    quote!(::core::concat!(::core::module_path!(), "::", #type_part #function))
}

/// Puts the site's static and the guard in front of the body, and hands the body's value to
/// the guard's exit. The statements themselves are untouched, so inference, `return` and `?`
/// are unchanged; the value passes through `leave`, in the body's tail position (the return
/// type still flows into it), so that it is computed before the exit probe runs: a body
/// computed in registers alone could otherwise move past the exit, its time given to the
/// caller. A body without a value (`()`, or one that never returns) is left as it was: a
/// call after it would be unreachable, which rustc would say in the user's crate.
fn instrument(block: &mut Block, sig: &Signature, name: SiteName) {
    // The function name's location, not the attribute's (which `line!()` would give): on an
    // impl block every function would otherwise share the line of the one attribute.
    let location = sig.ident.span().unwrap();
    let file = LitStr::new(&location.file(), sig.ident.span());
    let line = Literal::u32_unsuffixed(location.line() as u32);
    // Mixed-site hygiene hides the guard from the body, which so cannot drop it early.
    let span = Span::mixed_site();
    let (name, enter) = match name {
        SiteName::Fixed(name) => (
            name,
            quote_spanned!(span=> ::parprof_rt::__private::enter(&__PARPROF_SITE)),
        ),
        SiteName::OfSelfType(name) => (
            name,
            quote_spanned!(span=>
                ::parprof_rt::__private::enter_method(&__PARPROF_SITE, ::core::any::type_name::<Self>)
            ),
        ),
    };
    let prologue: Block = syn::parse_quote_spanned!(span=> {
        static __PARPROF_SITE: ::parprof_rt::__private::Site =
            ::parprof_rt::__private::Site::new(#name, #file, #line);
        let __parprof_guard = #enter;
    });
    if !returns_a_value(sig, block) {
        block.stmts.splice(0..0, prologue.stmts);
        return;
    }
    let body = Block {
        brace_token: block.brace_token,
        stmts: std::mem::take(&mut block.stmts),
    };
    let tail: Expr = syn::parse_quote_spanned!(span=>
        ::parprof_rt::__private::leave(__parprof_guard, #body)
    );
    block.stmts = prologue.stmts;
    block.stmts.push(Stmt::Expr(tail, None));
}

/// Whether the body ends in an expression that may give a value, as its syntax shows: not
/// `-> !`, not a body ending in a statement, not a tail of `return`, `loop` or `panic!` and
/// its kin. (A tail call of a function that never returns is not seen: a probe on it gets an
/// unreachable-code warning.)
fn returns_a_value(sig: &Signature, block: &Block) -> bool {
    if matches!(&sig.output, ReturnType::Type(_, ty) if matches!(**ty, Type::Never(_))) {
        return false;
    }
    match block.stmts.last() {
        Some(Stmt::Expr(tail, None)) => !diverges(tail),
        Some(Stmt::Macro(m)) => m.semi_token.is_none() && !is_diverging_macro(&m.mac),
        _ => false,
    }
}

fn diverges(tail: &Expr) -> bool {
    match tail {
        Expr::Return(_) | Expr::Loop(_) => true,
        Expr::Macro(m) => is_diverging_macro(&m.mac),
        _ => false,
    }
}

fn is_diverging_macro(mac: &syn::Macro) -> bool {
    (mac.path.segments.last()).is_some_and(|last| {
        ["panic", "unreachable", "todo", "unimplemented"]
            .iter()
            .any(|name| last.ident == name)
    })
}
