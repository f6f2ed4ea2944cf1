//! The configuration idiom of the workspace.
//!
//! Every configuration struct of the `dml-*` crates is a plain serde struct declared through
//! [`config!`]: each field carries its default after `=`, written once. The macro derives
//! `Serialize`/`Deserialize` with `#[serde(default, deny_unknown_fields)]` (so a TOML table may
//! give any subset of the keys, and a misspelt key is an error naming it), implements `Default`
//! from those values, and appends "Default: `value`." to each field's documentation, so the
//! rendered docs state the default without the doc comment repeating it.
//!
//! ```
//! dml_config::config! {
//!     /// Configuration of an example loss.
//!     #[derive(Clone, Debug, PartialEq)]
//!     pub struct ExampleConfig {
//!         /// The margin α.
//!         pub margin: f64 = 0.2,
//!         /// An optional override.
//!         pub distance: Option<String> = None,
//!     }
//! }
//! let c: ExampleConfig = toml::from_str("margin = 0.5").unwrap();
//! assert_eq!(c, ExampleConfig { margin: 0.5, ..ExampleConfig::default() });
//! assert!(toml::from_str::<ExampleConfig>("margn = 0.5").is_err());
//! ```
//!
//! The crate depends on nothing; the crate that uses the macro depends on `serde` with its
//! `derive` feature (every crate of the workspace does).
#![warn(missing_docs)]

/// Declares a configuration struct whose fields carry their defaults (see the crate docs).
///
/// Attributes before the struct (documentation, further derives, `#[serde(...)]` container
/// attributes) and before each field (documentation, `#[serde(alias = "...")]`, …) are kept.
#[macro_export]
macro_rules! config {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field_vis:vis $field:ident : $ty:ty = $default:expr
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(::serde::Serialize, ::serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        $vis struct $name {
            $(
                $(#[$field_meta])*
                #[doc = ""]
                #[doc = concat!("Default: `", stringify!($default), "`.")]
                $field_vis $field: $ty,
            )*
        }

        impl ::core::default::Default for $name {
            fn default() -> Self {
                Self {
                    $($field: $default,)*
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::config! {
        /// A configuration with every kind of field the workspace uses.
        #[derive(Clone, Debug, PartialEq)]
        pub struct Sample {
            /// A number.
            pub eps: f64 = 0.05,
            /// A count.
            pub iters: usize = 100,
            /// A renamed key that also reads its old name.
            #[serde(alias = "old_flag")]
            pub flag: bool = true,
            /// A list.
            pub mean: Vec<f64> = vec![0.485, 0.456, 0.406],
            /// An optional value.
            pub seed: Option<u64> = None,
        }
    }

    #[test]
    fn missing_keys_take_the_declared_defaults() {
        let c: Sample = toml::from_str("eps = 0.1").unwrap();
        assert_eq!(
            c,
            Sample {
                eps: 0.1,
                iters: 100,
                flag: true,
                mean: vec![0.485, 0.456, 0.406],
                seed: None,
            }
        );
        assert_eq!(toml::from_str::<Sample>("").unwrap(), Sample::default());
    }

    #[test]
    fn unknown_keys_are_named_and_aliases_resolve() {
        let err = toml::from_str::<Sample>("epss = 0.1").unwrap_err().to_string();
        assert!(err.contains("epss"), "{err}");
        let c: Sample = toml::from_str("old_flag = false").unwrap();
        assert!(!c.flag);
    }

    #[test]
    fn a_serialised_config_reads_back_equal() {
        let c = Sample {
            seed: Some(7),
            ..Sample::default()
        };
        let text = toml::to_string(&c).unwrap();
        assert_eq!(toml::from_str::<Sample>(&text).unwrap(), c);
    }
}
