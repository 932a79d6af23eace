//! Numeric blow-ups in training output: NaN/inf losses, NaN gradient norms, and a mixed-precision
//! loss scale that collapses.
//!
//! A dynamic loss scaler halving its scale a few times early in training is normal (DeepSpeed
//! logs "OVERFLOW! … reducing to 32768" while it calibrates); only a scale at or below
//! `min_loss_scale` (default 1) means the gradients are persistently non-finite.

use crate::model::{Blame, Evidence, Kind};
use regex::Regex;
use std::sync::OnceLock;

struct Patterns {
    loss_value: Regex,
    grad_norm: Regex,
    scale: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        loss_value: Regex::new(
            r#"(?i)\bloss\w{0,20}['"]?\s*(?:[:=]|\bis\b|\bbecame\b)\s*['"\[]?\s*(?:tensor\(\s*)?(-?nan|-?inf(?:inity)?)\b"#,
        )
        .expect("static regex"),
        grad_norm: Regex::new(
            r#"(?i)\bgrad(?:ient)?[_ ]?norm\w{0,10}['"]?\s*(?:[:=]|\bis\b)\s*['"]?\s*(?:tensor\(\s*)?(-?nan|-?inf)\b"#,
        )
        .expect("static regex"),
        scale: Regex::new(r"(?i)loss scale.{0,80}?reducing (?:loss scale )?to:?\s*([0-9][0-9.eE+-]{0,30})|reducing loss scale to:?\s*([0-9][0-9.eE+-]{0,30})")
            .expect("static regex"),
    })
}

fn headline(category: &'static str, hint: &'static str) -> Evidence {
    Evidence::Headline {
        kind: Kind::Numeric,
        category: category.into(),
        blame: Blame::Application,
        hint: hint.into(),
        rule: category.into(),
    }
}

const LOSS_HINT: &str = "The loss became NaN/inf: check the learning rate and warm-up, input data \
    for NaN/inf, and mixed-precision settings; resume from the last finite checkpoint.";
const INF_HINT: &str =
    "The loss became infinite: look for log(0) or division by zero in the loss, \
    and for exploding activations (lower the learning rate, clip gradients).";
const GRAD_HINT: &str = "The gradient norm is NaN/inf: a layer produced non-finite gradients; \
    enable anomaly detection for one step and check the learning rate and inputs.";
const SCALE_HINT: &str = "The mixed-precision loss scale collapsed, so every step overflows: the \
    model produces non-finite gradients; check for NaN inputs, lower the learning rate, or try bf16.";

/// Returns numeric evidence for a line, or `None`.
pub fn parse(line: &str, min_loss_scale: f64) -> Option<Evidence> {
    let p = patterns();
    if line.contains("non-finite") {
        if line.contains("loss") {
            return Some(headline("non_finite_loss", LOSS_HINT));
        }
        if line.contains("norm") {
            return Some(headline("nan_grad_norm", GRAD_HINT));
        }
    }
    if line.contains("infinite or NaN") && line.to_ascii_lowercase().contains("loss") {
        return Some(headline("non_finite_loss", LOSS_HINT));
    }
    if line.contains("loss scale already at minimum") {
        return Some(headline("loss_scale_collapse", SCALE_HINT));
    }
    if let Some(c) = p.scale.captures(line) {
        let v = c
            .get(1)
            .or_else(|| c.get(2))
            .map(|m| m.as_str().trim_end_matches('.'));
        if let Some(Ok(v)) = v.map(str::parse::<f64>) {
            if v <= min_loss_scale {
                return Some(headline("loss_scale_collapse", SCALE_HINT));
            }
        }
        return None;
    }
    if let Some(c) = p.grad_norm.captures(line) {
        let _ = c;
        return Some(headline("nan_grad_norm", GRAD_HINT));
    }
    if let Some(c) = p.loss_value.captures(line) {
        let v = c[1].to_ascii_lowercase();
        return Some(if v.contains("nan") {
            headline("non_finite_loss", LOSS_HINT)
        } else {
            headline("inf_loss", INF_HINT)
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat(line: &str) -> Option<String> {
        match parse(line, 1.0) {
            Some(Evidence::Headline { category, .. }) => Some(category.into_owned()),
            _ => None,
        }
    }

    #[test]
    fn families() {
        assert_eq!(
            cat("{'loss': nan, 'grad_norm': 1.0}").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("step 5 loss=inf lr 1e-4").as_deref(), Some("inf_loss"));
        assert_eq!(
            cat("Loss is nan, stopping training").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("grad_norm: nan").as_deref(), Some("nan_grad_norm"));
        assert_eq!(
            cat("Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 2.0e-146")
                .as_deref(),
            Some("loss_scale_collapse")
        );
        assert_eq!(
            cat("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1").as_deref(),
            Some("loss_scale_collapse")
        );
    }

    #[test]
    fn calibration_is_not_a_blow_up() {
        assert_eq!(cat("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768"), None);
        assert_eq!(
            cat("Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 32768.0"),
            None
        );
        assert_eq!(cat("loss=0.2345 nan_count=0"), None);
    }
}
