//! Support for the code `#[probe]` generates; not a public API.

#[cfg(not(feature = "off"))]
pub use crate::probe::{Guard, Site, enter, enter_method, leave};

#[cfg(feature = "off")]
pub use crate::off::{Guard, Site, enter, enter_method, leave};
