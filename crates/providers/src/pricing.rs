//! The built-in price table: US dollars per million tokens.
//!
//! Sources (standard, non-batch API prices):
//! * OpenAI: <https://openai.com/api/pricing/> and
//!   <https://platform.openai.com/docs/pricing> ("Cached input" column).
//!   OpenAI does not bill prompt-cache writes, so its rows have no
//!   cache-write price.
//! * Anthropic: <https://docs.anthropic.com/en/docs/about-claude/pricing>
//!   ("Base Input Tokens", "5m Cache Writes", "Cache Hits & Refreshes",
//!   "Output Tokens"). Cache writes are priced at the 5-minute TTL rate (1.25×
//!   input); 1-hour writes (2× input) and the long-context premium of
//!   Sonnet 4/4.5 above 200k input tokens are not modelled.
//!
//! A model name is priced by the row whose name is its longest prefix ending
//! at a name boundary, so `gpt-4o-2024-08-06` is priced as `gpt-4o` while
//! `gpt-4o-mini-2024-07-18` is priced as `gpt-4o-mini`, and
//! `claude-sonnet-4-5-20250929` as `claude-sonnet-4`. Rows exist for some
//! newer siblings (`gpt-4.1-mini`, `claude-opus-4-5`, ...) only so that
//! the prefix rule does not price them at their older sibling's rate.

use crate::model::Usage;

/// Prices of one model family, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// The model-name prefix this row prices (e.g. `gpt-4o`).
    pub model_prefix: &'static str,
    /// Uncached input tokens.
    pub input: f64,
    /// Output tokens (reasoning included).
    pub output: f64,
    /// Input tokens read from the prompt cache.
    pub cache_read: f64,
    /// Input tokens written to the prompt cache; `None` when the provider does
    /// not bill writes separately (OpenAI), in which case writes are priced as
    /// uncached input.
    pub cache_write: Option<f64>,
}

impl Price {
    /// The cost in US dollars of `usage` at these prices.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per_token = |tokens: u64, per_million: f64| tokens as f64 * per_million / 1_000_000.0;
        per_token(usage.input_tokens, self.input)
            + per_token(usage.output_tokens, self.output)
            + per_token(usage.cache_read_tokens, self.cache_read)
            + per_token(usage.cache_write_tokens, self.cache_write.unwrap_or(self.input))
    }
}

const fn row(model_prefix: &'static str, input: f64, output: f64, cache_read: f64, cache_write: Option<f64>) -> Price {
    Price { model_prefix, input, output, cache_read, cache_write }
}

/// The built-in table (see the module documentation for the sources).
pub const PRICES: &[Price] = &[
    // OpenAI, https://openai.com/api/pricing/
    row("gpt-4o", 2.50, 10.00, 1.25, None),
    row("gpt-4o-mini", 0.15, 0.60, 0.075, None),
    row("gpt-4.1", 2.00, 8.00, 0.50, None),
    row("gpt-4.1-mini", 0.40, 1.60, 0.10, None),
    row("gpt-4.1-nano", 0.10, 0.40, 0.025, None),
    // Anthropic, https://docs.anthropic.com/en/docs/about-claude/pricing
    row("claude-sonnet-4", 3.00, 15.00, 0.30, Some(3.75)),
    row("claude-3-7-sonnet", 3.00, 15.00, 0.30, Some(3.75)),
    row("claude-3-5-sonnet", 3.00, 15.00, 0.30, Some(3.75)),
    row("claude-3-5-haiku", 0.80, 4.00, 0.08, Some(1.00)),
    row("claude-haiku-4-5", 1.00, 5.00, 0.10, Some(1.25)),
    row("claude-opus-4", 15.00, 75.00, 1.50, Some(18.75)),
    row("claude-opus-4-5", 5.00, 25.00, 0.50, Some(6.25)),
];

/// The price row for `model`: the row whose `model_prefix` is the longest
/// prefix of `model` that is either all of `model` or followed by `-`, `@`
/// or `:` (date suffixes, Vertex `@` versions). `None` when no row matches.
pub fn price(model: &str) -> Option<&'static Price> {
    PRICES
        .iter()
        .filter(|p| {
            model.strip_prefix(p.model_prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '@', ':']))
        })
        .max_by_key(|p| p.model_prefix.len())
}

/// The cost in US dollars of `usage` on `model`, or `None` when `model` is
/// not in the table. `usage.cost` itself is ignored.
pub fn cost(model: &str, usage: &Usage) -> Option<f64> {
    price(model).map(|p| p.cost(usage))
}

/// A price a config file sets for a model prefix (`[agent.prices."MODEL"]` in
/// hookbox.toml), in US dollars per million tokens; it wins over the built-in table.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceOverride {
    /// Uncached input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Cache reads (default: the input price).
    pub cache_read: Option<f64>,
    /// Cache writes (default: the input price).
    pub cache_write: Option<f64>,
}

impl PriceOverride {
    /// The cost of `usage` at this price.
    pub fn cost(&self, usage: &Usage) -> f64 {
        Price {
            model_prefix: "",
            input: self.input,
            output: self.output,
            cache_read: self.cache_read.unwrap_or(self.input),
            cache_write: self.cache_write,
        }
        .cost(usage)
    }
}

/// The override for `model` among `overrides` (the longest matching prefix,
/// with the same boundary rule as the built-in table).
pub fn find_override<'a>(
    overrides: &'a std::collections::BTreeMap<String, PriceOverride>,
    model: &str,
) -> Option<&'a PriceOverride> {
    overrides
        .iter()
        .filter(|(prefix, _)| {
            model.strip_prefix(prefix.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '@', ':']))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_win_by_longest_prefix() {
        let mut o = std::collections::BTreeMap::new();
        o.insert("gpt-4o".to_string(), PriceOverride { input: 1.0, output: 2.0, cache_read: None, cache_write: None });
        o.insert(
            "gpt-4o-mini".to_string(),
            PriceOverride { input: 0.1, output: 0.2, cache_read: None, cache_write: None },
        );
        assert_eq!(find_override(&o, "gpt-4o-2024-08-06").map(|p| p.input), Some(1.0));
        assert_eq!(find_override(&o, "gpt-4o-mini").map(|p| p.input), Some(0.1));
        assert!(find_override(&o, "gpt-4").is_none());
        let p = PriceOverride { input: 1.0, output: 2.0, cache_read: Some(0.5), cache_write: None };
        assert!((p.cost(&usage(1_000_000, 1_000_000, 1_000_000, 0)) - 3.5).abs() < 1e-9);
    }

    fn usage(input: u64, output: u64, read: u64, write: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            cost: 0.0,
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn longest_prefix_wins() {
        let name = |m: &str| price(m).map(|p| p.model_prefix);
        assert_eq!(name("gpt-4o"), Some("gpt-4o"));
        assert_eq!(name("gpt-4o-2024-08-06"), Some("gpt-4o"));
        assert_eq!(name("gpt-4o-mini"), Some("gpt-4o-mini"));
        assert_eq!(name("gpt-4o-mini-2024-07-18"), Some("gpt-4o-mini"));
        assert_eq!(name("gpt-4.1-2025-04-14"), Some("gpt-4.1"));
        assert_eq!(name("gpt-4.1-mini-2025-04-14"), Some("gpt-4.1-mini"));
        assert_eq!(name("claude-sonnet-4-20250514"), Some("claude-sonnet-4"));
        assert_eq!(name("claude-sonnet-4-5-20250929"), Some("claude-sonnet-4"));
        assert_eq!(name("claude-sonnet-4@20250514"), Some("claude-sonnet-4"));
        assert_eq!(name("claude-3-5-sonnet-20241022"), Some("claude-3-5-sonnet"));
        assert_eq!(name("claude-3-7-sonnet-latest"), Some("claude-3-7-sonnet"));
        assert_eq!(name("claude-3-5-haiku-20241022"), Some("claude-3-5-haiku"));
        assert_eq!(name("claude-opus-4-1-20250805"), Some("claude-opus-4"));
        assert_eq!(name("claude-opus-4-5-20251101"), Some("claude-opus-4-5"));
    }

    #[test]
    fn unknown_models_have_no_price() {
        for m in ["", "gpt-4", "gpt-4o1", "gpt-4omni", "o3", "claude-3-sonnet-20240229", "anthropic/claude-sonnet-4.5"]
        {
            assert!(price(m).is_none(), "{m} should not be priced");
            assert_eq!(cost(m, &usage(1000, 1000, 0, 0)), None);
        }
    }

    #[test]
    fn cost_per_million() {
        // 1M of each kind costs exactly the row's prices.
        assert!(close(cost("gpt-4o", &usage(1_000_000, 0, 0, 0)), 2.50));
        assert!(close(cost("gpt-4o", &usage(0, 1_000_000, 0, 0)), 10.00));
        assert!(close(cost("gpt-4o", &usage(0, 0, 1_000_000, 0)), 1.25));
        assert!(close(cost("gpt-4o-mini", &usage(1_000_000, 1_000_000, 1_000_000, 0)), 0.15 + 0.60 + 0.075));
        assert!(close(cost("claude-3-5-haiku-latest", &usage(0, 0, 0, 1_000_000)), 1.00));
        assert!(close(
            cost("claude-opus-4-20250514", &usage(1_000_000, 1_000_000, 1_000_000, 1_000_000)),
            15.0 + 75.0 + 1.50 + 18.75
        ));
    }

    #[test]
    fn openai_cache_writes_cost_as_input() {
        assert!(close(cost("gpt-4.1", &usage(0, 0, 0, 1_000_000)), 2.00));
    }

    #[test]
    fn fixture_08_turn_1_cost() {
        // 71 prompt tokens, 46 completion tokens on gpt-4o.
        let c = cost("gpt-4o-2024-08-06", &usage(71, 46, 0, 0));
        assert!(close(c, (71.0 * 2.50 + 46.0 * 10.00) / 1e6));
    }
}
