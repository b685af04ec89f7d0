//! Procedural macros of parprof. Use them through `parprof_rt`.
use proc_macro::TokenStream;
use quote::quote;

/// Timestamped entry/exit probe (minimal version; to be completed).
#[proc_macro_attribute]
pub fn probe(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut f: syn::ItemFn = syn::parse_macro_input!(item);
    let name = f.sig.ident.to_string();
    let body = &f.block;
    f.block = syn::parse_quote!({
        static __PARPROF_SITE: ::parprof_rt::__private::Site =
            ::parprof_rt::__private::Site::new(concat!(module_path!(), "::", #name), file!(), line!());
        let __parprof_guard = ::parprof_rt::__private::enter(&__PARPROF_SITE);
        #body
    });
    quote!(#f).into()
}
