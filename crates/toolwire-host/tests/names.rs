//! Properties of provider-safe names over arbitrary server and tool names: every name is one
//! providers accept, the same input always gives the same name, a name that already fits is
//! kept, and different qualified names stay apart.

use proptest::prelude::*;
use toolwire_host::{Naming, is_provider_safe, provider_safe};

/// Names as servers write them: letters, digits, separators, spaces, Unicode, any length.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9_]{0,20}",
        "[A-Za-z0-9_.:/ -]{1,40}",
        "\\PC{1,30}",
        "[a-z_]{60,120}",
    ]
}

proptest! {
    #[test]
    fn every_provider_safe_name_fits_and_is_stable(server in name(), tool in name()) {
        let named = Naming::ProviderSafe.name(&server, "__", &tool);
        prop_assert!(is_provider_safe(&named), "{named:?}");
        prop_assert_eq!(&named, &Naming::ProviderSafe.name(&server, "__", &tool));
        let qualified = format!("{server}__{tool}");
        if is_provider_safe(&qualified) {
            prop_assert_eq!(named, qualified);
        }
    }

    #[test]
    fn different_qualified_names_get_different_names(a in name(), b in name(), tool in name()) {
        prop_assume!(a != b);
        prop_assert_ne!(provider_safe(&a, "__", &tool), provider_safe(&b, "__", &tool), "{} and {}", a, b);
    }
}
