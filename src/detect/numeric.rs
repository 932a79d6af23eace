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
    /// A loss or gradient-norm key with a non-finite value after `:` or `=` (quoted keys of
    /// metrics dicts, `loss=nan` of progress bars, `loss: tensor(nan, …)`).
    keyed: Regex,
    /// A key and a value separated by spaces only (`step 5 loss nan lr 1e-4`, `| loss nan |`,
    /// loguru-style tables that bracket the key: `| [Loss] nan |`).
    bare: Regex,
    /// `Loss is nan`: a value as Python prints a float (lowercase), after `is`/`became`.
    verbal: Regex,
    /// A group of loss components after a `Losses`/`loss` header, any of them non-finite:
    /// `[Losses: x 0.1, y 0.2, …, total nan, …]` (older YOLO trainers) or `losses {cls nan}`.
    group: Regex,
    /// Words that make a line prose about NaN rather than a report of one.
    prose: Regex,
    /// A verb right after the value: the value is the subject of a sentence ("grad_norm nan is
    /// caused by …"), not a printed metric.
    prose_after: Regex,
    scale: Regex,
    /// A value before its key inside a program's message, with no verb (`ValueError: nan loss`).
    message_adjectival: Regex,
    /// A program's message that opens with a non-finite value and says that a check found it,
    /// whatever held it: "RuntimeError: NaN detected in latents" (kohya's latent cache),
    /// "ValueError: NaN values found in input", "WARNING: NaN or Inf found in attention weights".
    message_found: Regex,
    /// A line that opens with a value and its key found by a check (`NaN gradient detected in …`).
    detected: Regex,
    /// Caffe's `debug_info` lines (src/caffe/net.cpp `ForwardDebugInfo`, `BackwardDebugInfo`,
    /// `UpdateDebugInfo`): `[Backward] Layer conv3_1, bottom blob conv3_1 diff: nan`,
    /// `[Forward] Layer fc8, top blob fc8 data: inf`, `[Update] Layer fc8, param 0 data: nan;
    /// diff: nan`.
    caffe_debug: Regex,
    /// MXNet's `mx.monitor.Monitor` rows, a statistic (the norm by default) of each array it
    /// watches: `Batch:      51 conv2_2_output                 nan` (python/mxnet/monitor.py,
    /// `toc_print`, "Batch: {:7d} {:30s} {:s}"), the array's name ending in what it holds
    /// (`_output`, `_weight`, `_backward_data`).
    mxnet_monitor: Regex,
    /// A loss scale printed as a metric: `loss_scale=0.062` (fairseq's progress line),
    /// `'loss_scale': 0.5` (metrics dicts).
    scale_metric: Regex,
    /// "… or nan" right after an `inf` value: either of the two.
    or_nan: Regex,
    /// A YOLO trainer's progress row: `epoch/epochs`, the GPU memory in G, then the loss columns
    /// (YOLOv5 train.py `('%10s' * 2 + '%10.4g' * 6) % (f'{epoch}/{epochs - 1}', mem, *mloss,
    /// …)`; Ultralytics' `f"{self._get_memory():.3g}G"`), with a non-finite loss column and
    /// another column after it; also behind a collector's or launcher's prefix (a container
    /// runtime's timestamp, `svc-1  | `, `[default0]:`).
    yolo_row: Regex,
    /// A row of the key/value table that OpenAI baselines' logger prints at each dump
    /// (`logger.dumpkvs()`, baselines/logger.py `HumanOutputFormat`; also improved- and
    /// guided-diffusion, and stable-baselines3's nested `|    loss | nan |`): `| loss | nan |`
    /// between dashed rules, also behind a launcher's or collector's prefix.
    table_row: Regex,
    /// A log level that tags what follows it as a program's message: `WARNING:`, `[ERROR]`
    /// anywhere (upper case), `Warning:` at the start of the line or of a quotation (a code span
    /// too: "`WARNING: The grad norm is nan. Skipping updating the model.`", ESPnet's trainer), and
    /// Python logging's basic format, the level and the logger's name before the message
    /// (`WARNING:root:The grad norm is nan.`, `logging.BASIC_FORMAT`).
    level_tag: Regex,
    /// The value before its key, after a verb of meeting it, as messages word it: "received a
    /// nan loss", "encountered NaN grad norm".
    adjectival: Regex,
    /// A check's message that opens with its verb before the value and its key: "Detected NaN
    /// loss", also as a title's segment after a dash.
    detected_first: Regex,
    /// Megatron-LM's result validation (megatron/core/rerun_state_machine.py, `validate_result`):
    /// "Rank 3, node n1, device 3, iteration 205: Unexpected result nan (message='found NaN in
    /// local forward loss calculation')", raised as a RuntimeError or logged; the value is the
    /// loss or the gradient norm the check rejected, as Python prints it (`nan`, `inf`, or a
    /// 0-dim tensor's repr).
    unexpected: Regex,
    /// Words that keep a tagged message about a value hypothetical or negated ("WARNING: if the
    /// loss is nan, …", "ignore batches where the loss is nan", "no nan loss detected").
    message_prose: Regex,
    /// A conditional word ([`CONDITIONAL`]), which keeps its whole sentence a supposition.
    conditional: Regex,
    /// A sentence that tells how a value turned out in the writer's run: a verb of becoming or
    /// of staying between the key and the value ("the training loss became Nan", "grad_norm
    /// keeps being nan", "the actor grad norms were always NaN").
    changed_state: Regex,
    /// A sentence that says what made the value non-finite in the writer's run, the key between
    /// a causative verb and the value ("the new kernel makes the loss nan", "fp16 causes the
    /// loss to become NaN").
    caused_state: Regex,
    /// A sentence or title that says what a model or program put out in the writer's run: a
    /// verb of producing before the value ("torch.compile on the model produces NaNs", "the
    /// fine-tuned model outputs NaN values").
    produced_value: Regex,
    /// Words before such a sentence that make it a supposition, a question or advice rather
    /// than what happened ("if the loss becomes nan", "why loss become nan", "in cases where
    /// loss goes to nan", "skip the step when …").
    hedged: Regex,
}

/// Keys whose non-finite value is an event: any key that ends in or contains `loss` (loss,
/// train_loss, lm loss, nll_loss, `'loss'`), and gradient norms (grad_norm, grad norm,
/// gradient_norm, train_grad_norm, total_norm, and fairseq's `gnorm`, fairseq/trainer.py).
/// Loggers that name a loss by its function print the name of torch.nn's loss class without
/// "Loss" (torch/nn/modules/loss.py: CrossEntropyLoss, SmoothL1Loss, NLLLoss, BCELoss, KLDivLoss,
/// MSELoss, HuberLoss; torchvision's sigmoid_focal_loss): GluonCV's detection scripts log
/// `CrossEntropy=12.25, SmoothL1=nan` (`mx.metric.Loss('SmoothL1')`). Marian and the TensorFlow
/// 1.x tutorials call the objective the cost (Marian's "Ep. 1 : Up. 300 : … : Cost nan : Time …",
/// src/training/scheduler.h; `cost = nan`). Gradient-boosting
/// libraries print their objective's metric the same way, by its short name (XGBoost's
/// `[8] eval-mae:inf train-mae:inf`, tab-separated; `rmse`; the names of XGBoost's `eval_metric`).
/// A key starts where an ASCII word does: Chinese runs its words together ("训练一段时间后loss=nan",
/// loss=nan after training a while), and a Han character is a word character to Unicode's `\b`.
/// The gradients may be printed under their own short name (`loss =13.6234, grad = nan`), which
/// is the gradient norm's family.
/// Shared by the three value forms.
const KEY: &str = r"(?P<key>(?-u:\b)[a-z_]*loss[a-z_0-9]*|(?-u:\b)[a-z_]*grad(?:ient)?[_ ]?norm[a-z_0-9]*|(?-u:\b)total_norm|(?-u:\b)gnorm\b|(?-u:\b)grad(?:ient)?s?\b|(?-u:\b)(?:[a-z]+_)?(?:cross[_-]?entropy|smooth_?l1|nll|bce|kl_?div|mse|rmse|mae|huber|focal)\b|(?-u:\b)(?:[a-z]+_)?cost\b)";
/// A non-finite value named before its key, in the spellings writers use (`Nan` too): "nan loss",
/// "NaN grad norm". Shared by the forms that read the value first (`adjectival`,
/// `message_adjectival`).
const VALUE_THEN_KEY: &str =
    r"\b(?P<tok>nan|NaN|Nan|NAN|inf|Inf|INF)\s+(?P<key>(?i:loss|grad(?:ient)?[_ ]?norm))";
/// The value before its key as a report's object puts it, also with the key after "in", "for" or
/// "on" ("we get nan in loss", "got NaN in the training loss", "I receive NaNs for the training
/// and validation loss"; the plural counts the values, steps or runs): `adjectival`'s, after a
/// verb of getting.
const VALUE_IN_KEY: &str = r"\b(?P<tok>nan|NaN|Nan|NAN|inf|Inf|INF)s?\s+(?i:(?:in|for|on)\s+(?:the\s+|my\s+|our\s+|its\s+)?(?:(?:training|train|validation|val|test|total)(?:\s*(?:and|or|&|/)\s*(?:training|train|validation|val|test|total))?\s+)?)?(?P<key>(?i:loss|grad(?:ient)?[_ ]?norm))";
/// What a key may carry after its loss or norm word: a statistic after a slash, as tabular
/// loggers print their per-iteration summaries (rllab/rlpyt's `actor_loss/Median      nan`,
/// TensorBoard-style `loss/total`), or up to two capitalised words of a title-case key
/// (HiFi-GAN's `Gen Loss Total :  nan`).
const KEY_TAIL: &str = r"(?:/[A-Za-z0-9_]{1,24})?(?-i:(?:[ ][A-Z][a-z]{1,11}){0,2})";
/// The non-finite token and what may follow a value (so `nan_count`, `info` or `inf.5` never
/// count; a zero fraction as a template with `{:.1f}`-style text prints it, `loss=nan.0`;
/// PaddleOCR's metric logger's padding with `x` to six characters, `'{}: {:x<6f}'` in
/// ppocr/utils/stats.py (`SmoothedValue.log`), which no finite value needs: `loss: nanxxx`,
/// `-infxx`; a full stop or a colon only before a space or the end, as a progress bar's description ends in one,
/// `Valid Epoch: 16 Loss: nan: 100%|…`; Markdown's closing `**`; a Han character,
/// since Chinese runs its words together: `grad_norm为Nan的情况`, and Korean's and Japanese
/// particles, which attach to the word: `loss = nan이 뜨다가`, `lossがnanになる`). In
/// the bare, verbal and group forms it is matched case-sensitively, in the spellings runtimes
/// print: Python, numpy and PyTorch `nan`/`inf` (C's `%f` too, `%F` gives `NAN`/`INF`), and the
/// JVM's `Double.toString` and JavaScript's `NaN`/`Infinity` (Scala/Java trainers, JS loggers).
const TOKEN: &str = r#"(?P<tok>[-+]?(?:nan|inf(?:inity)?|NaN|NAN|INF|Infinity))(?:\.0+|x{2,3})?(?:$|[\s,;|}\])'"`*，；。!！\p{Han}\p{Hangul}\p{Hiragana}\p{Katakana}]|[.:](?:\s|$)|\((?:[-+]?(?:nan|inf|[0-9][0-9.eE+-]{0,24}))\))"#;

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        // The value may follow a number in parentheses' stead: metric loggers print "current
        // (average)" — `loss: 0.4012 (nan)` (torchvision references' SmoothedValue, DETR,
        // BEiT/unilm) — or the reverse, `loss: nan (0.4012)`. A key may name its statistics
        // and print them as a tuple: `validation loss (min, avg, max): (inf, nan, -inf)`.
        // Fixed-width tables pad the key before its colon (`LOSS     :  nan`), and Chinese
        // reports join key and value with a copula (`loss为 nan`, `grad_norm为 nan`), also after
        // an adverb ("grad_norm总是nan", grad_norm is always nan; "grad_norm就是nan", is simply nan), and
        // with a verb of turning into (`loss变为 nan`), also after "the value of" (`loss的值是nan`)
        // and after further keys joined by "and" (`loss和grad_norm_g的值是Nan`; the first key names
        // the family); Korean and Japanese put a subject or topic
        // particle on the key (`loss가 nan이 발생합니다`, the loss goes nan). A message may put the value in
        // parentheses after its key: ESPnet's "loss (=nan) is not correct" (espnet/asr/
        // pytorch_backend/asr.py, `CustomUpdater.update_core`). Static-graph trainers print a
        // fetched value as the one-element array it is (PaddlePaddle's `loss: [nan]`,
        // TensorFlow 1.x's `loss = [nan]`). A script may print the expression it read the value
        // with (`print("train loss.item():", loss.item())`).
        keyed: Regex::new(&format!(
            r#"(?i){KEY}{KEY_TAIL}(?:(?:和|与|與|及|、)[A-Za-z][A-Za-z0-9_]{{0,29}}){{0,3}}(?:\.item\(\))?['"\]]?(?:\s{{0,2}}\([a-z, ]{{1,40}}\))?[ \t]{{0,16}}(?:(?:的值|的数值|的數值)?(?:总|總|一直|都|还|還|又|全|就|也|仍然?|依然|始终|始終|直接)?(?:为|為|是)|\(?[:=]|变成|變成|变为|變為|[가이는은도がはも])[ \t]{{0,16}}(?:['"(]|\[\s{{0,2}})?(?:tensor\(\s*|[-+]?[0-9][0-9.eE+-]{{0,24}}\s{{0,2}}\(\s{{0,2}})?{TOKEN}"#
        ))
        .expect("static regex"),
        // Fixed-width formatters pad the value into a column (`loss        nan`); metric
        // loggers without a colon print "current (average)" the same way as with one
        // (Swin-Transformer's `grad_norm 1.0323 (nan)`), and a script prints a tensor after its
        // name (`print("loss", loss)`: `loss tensor(nan, device='cuda:0', …)`).
        bare: Regex::new(&format!(
            r"(?i){KEY}{KEY_TAIL}\]?[ \t]{{1,16}}(?:[-+]?[0-9][0-9.eE+-]{{0,24}}\s{{0,2}}\(\s{{0,2}}|tensor\(\[?\s{{0,2}})?(?-i:{TOKEN})"
        ))
        .expect("static regex"),
        // The key may name whose value it is ("grad_norm of qwen2 is 'nan'"), the verb may be
        // plural ("the losses are nan"), and the value may be quoted as printed.
        verbal: Regex::new(&format!(
            r#"(?i){KEY}(?:\s+(?:of|for)\s+[\w.-]{{1,40}})?\s+(?:is|are|was|were|became)\s+['"`]?(?-i:{TOKEN})"#
        ))
            .expect("static regex"),
        group: Regex::new(&format!(
            r"(?i)\blosses?\b['\x22]?\s{{0,3}}[:=]?\s{{0,3}}[\[{{(]?[^\]}})]{{0,240}}?\b[a-z_]{{1,24}}['\x22]?\s{{0,3}}[:=]?\s{{1,3}}(?-i:{TOKEN})"
        ))
        .expect("static regex"),
        // Conditionals, verbs of advice or of handling ("Stop training after validation loss is
        // NaN", a changelog's item), and the articles and pronouns of a sentence before the
        // key ("the loss is nan", "my grad norm becomes inf", "we get loss nan"): log lines name
        // their keys bare.
        prose: Regex::new(
            r"(?i)\b(?:if|when|whenever|whether|unless|until|in case|once|avoid|prevent|detect|checks?|stop|skip|the|my|our|your|their|its|this|that|i|we|you|they|why|how|because|always|sometimes|often|becomes?|became|getting|gets?|got|turns?|goes)\b",
        )
        .expect("static regex"),
        prose_after: Regex::new(
            r"(?i)^\W{0,3}\s*(?:is|are|was|were|means?|caused?|causes|because|due|seems?|happens?|appears?|comes?|should|could|would|will|can|may|might)\b",
        )
        .expect("static regex"),
        // A scaler announcing its new scale: Apex and Lightning "… reducing loss scale to 32768.0",
        // DeepSpeed "Attempted loss scale: 2, reducing to 1" (deepspeed/runtime/fp16/
        // loss_scaler.py), fairseq "| WARNING: overflow detected, setting loss scale to: 0.25"
        // (fairseq's fp16 trainer); the verb varies by trainer, so any verb of lowering or
        // setting counts. A scale printed as a plain metric (Megatron's `loss scale: 1.0` under
        // bf16) is not a change and does not match.
        scale: Regex::new(
            r"(?i)loss[ _]scaler?\b.{0,80}?\b(?:reduc\w*|decreas\w*|lower\w*|set|setting|drop\w*|dropping|adjust\w*) (?:loss[ _]scale |the scale |scale )?to:?\s*([0-9][0-9.eE+-]{0,30})|\b(?:reduc\w*|decreas\w*|lower\w*|set|setting|drop\w*|adjust\w*) (?:the )?loss[ _]scale to:?\s*([0-9][0-9.eE+-]{0,30})",
        )
        .expect("static regex"),
        caffe_debug: Regex::new(&format!(
            r"\[(?P<pass>Forward|Backward|Update)\] Layer .{{0,200}}?\b(?:data|diff): (?-i:{TOKEN})"
        ))
        .expect("static regex"),
        mxnet_monitor: Regex::new(&format!(
            r"(?:^|[\s:])Batch:\s+\d+\s+(?P<name>[A-Za-z_][\w.-]*)\s+(?-i:{TOKEN})"
        ))
        .expect("static regex"),
        or_nan: Regex::new(r"^\s?or\s+(?i:nan)\b").expect("static regex"),
        yolo_row: Regex::new(&format!(
            r"(?:^|\s|[:|>])\s*\d{{1,5}}/\d{{1,5}}\s+[0-9.]{{1,8}}G(?:\s+[0-9][0-9.eE+-]{{0,24}}){{0,3}}\s+(?-i:{TOKEN})\s*(?:[-+]?[0-9]|nan\b|inf\b|NaN\b)"
        ))
        .expect("static regex"),
        table_row: Regex::new(&format!(r"(?i)(?:^|[\s:\]])\|\s*{KEY}\s*\|\s*(?-i:{TOKEN})\s*\|?\s*$"))
            .expect("static regex"),
        level_tag: Regex::new(
            r#"(?:^|[\s"'`\x{201c}(\[|:])(?:WARNING|WARN|ERROR|FATAL|CRITICAL)(?:\]:?|:)\s|(?:^|[\s"'`\x{201c}(\[|])(?:WARNING|ERROR|CRITICAL):[\w.]+:|(?:^\s*|["'`\x{201c}])(?:Warning|Error):\s|\b[A-Z][A-Za-z]*(?:Error|Exception):\s"#,
        )
        .expect("static regex"),
        adjectival: Regex::new(&format!(
            r"(?i:\b(?:received|receiving|receives?|get|gets|got|getting|encountered|encountering|detected|found|hit|observed|saw|see|seeing|meet|meeting|met|having|facing))\s+(?:(?i:an?)\s+)?[\x22'`\x{{201c}}]?{VALUE_IN_KEY}\b",
        ))
        .expect("static regex"),
        // A check's own line that opens with the value and its key and says it found them:
        // "NaN gradient detected in Linear4bit's input gradient" (a backward hook's print), "NaN
        // loss detected, skipping batch". Only at the start of the line, after list marks, a
        // clock or a bracketed tag: a sentence puts words before it.
        detected: Regex::new(
            r"^[\s>*\-\x{2022}\d:.,/T|]*(?:\[[^\]]{0,40}\]\s*)*(?P<tok>NaN|nan|NAN|Inf|inf|INF)\s+(?P<key>(?i:loss|gradients?|grads?|grad(?:ient)?[_ ]?norm))\s+(?:values?\s+)?(?:detected|found|encountered)\b",
        )
        .expect("static regex"),
        // A message that names the value before its key, without a verb: "ValueError:  [x] nan
        // loss" (DDSP-SVC's trainer), "RuntimeError: NaN loss at step 120", "RuntimeError:
        // [!] NaN loss with decoder_loss." (Mozilla TTS's losses.py names the term). The key ends the
        // phrase: in "NaN loss detection is enabled" it qualifies a noun, a feature's name.
        // A check's own message that opens with its verb, capitalised, before the value and its
        // key: "Detected NaN loss at step 12, skipping", "Found inf grad norm" (Coqui's trainer
        // raises "Detected NaN loss"), at the start of the line, after a bracketed tag ("[Bug]:
        // Detected NaN loss") or at the start of a title's segment after a dash, a bar or a colon
        // ("[Bug] VITS recipe - Detected NaN loss", "VITS: Detected NaN loss"). A sentence puts a
        // subject before the verb and writes it in lower case; a question ("Found NaN loss?")
        // asks.
        detected_first: Regex::new(
            r"(?:^[\s>*\-\x{2022}\d:.,/T]*(?:\[[^\]]{0,40}\]:?\s*)*|(?:\s[-\x{2013}\x{2014}|]|:)\s+)(?:Detected|Found|Encountered|Caught)\s+(?:an?\s+)?(?P<tok>NaN|nan|NAN|Inf|inf|INF)\s+(?P<key>(?i:loss|gradients?|grads?|grad(?:ient)?[_ ]?norm))\b",
        )
        .expect("static regex"),
        message_adjectival: Regex::new(&format!(
            r#"{VALUE_THEN_KEY}(?:\s*$|\s*[.,;:!)\]'"`]|\s+(?:at|in|on|with|for|after|during|encountered|detected|found|occurred|occured|appeared|value)\b)"#,
        ))
        .expect("static regex"),
        // A wrapper may put the exception's class between its own level and the message ("Error:
        // RuntimeError: NaN detected in latents", a UI's error report).
        message_found: Regex::new(
            r"^\s*(?:[A-Z][A-Za-z]{0,40}(?:Error|Exception):\s+)?(?:\[[^\]]{0,40}\]\s*)?(?:NaN|nan|NAN|Inf|inf|INF)(?:\s*(?:/|or|and/or)\s*(?:NaN|nan|Inf|inf|INF))?(?:\s+values?)?\s+(?:detected|found|encountered)\b",
        )
        .expect("static regex"),
        unexpected: Regex::new(
            r"Unexpected result (?:tensor\(\s*)?(?P<tok>-?(?:nan|inf))\b(?P<rest>.*)$",
        )
        .expect("static regex"),
        message_prose: Regex::new(&format!(r"(?i)\b(?:{CONDITIONAL}|{GUARDED_OR_NEGATED})\b"))
            .expect("static regex"),
        conditional: Regex::new(&format!(r"(?i)\b(?:{CONDITIONAL})\b")).expect("static regex"),
        // The verbs of becoming and staying that reports use, and the adverbs they put before
        // them; "is/was always" and "is still" say the same of a value that never was finite.
        // Writers spell the value as they please here (`Nan`), and emphasis may wrap the rest of
        // the sentence ("the loss is **always NaN**").
        // A gradient ("the gradient becomes NaN after 150 steps") is a gradient norm's family.
        // Several keys may share the verb ("the policy_loss, policy_entropy and approxkl all
        // become nan"; the first names the family), and a value may "equal" the token ("after a
        // while loss equals \"nan\""). Writers also let the value go or turn without a
        // preposition ("the loss goes NaN", "grad norm turned nan"), and may tell what the value
        // did first ("the loss shoots up and then goes NaN": up to five words before "and").
        changed_state: Regex::new(&format!(
            r#"(?i){}(?:\s*,\s*[A-Za-z0-9_.]{{1,30}}|\s+and\s+[A-Za-z0-9_.]{{1,30}}){{0,4}}(?:\s+(?:all|both))?(?:\s+(?:[a-z]{{1,12}}\s+){{1,5}}and)?\s+(?:[*_]{{1,2}})?(?:(?:always|still|suddenly|then|quickly|soon|eventually|sometimes|just|directly|immediately|constantly|consistently|continuously|also)\s+)?(?:became|becomes?|becoming|equal(?:s|ed|led)?(?:\s+to)?|ha(?:s|ve)\s+become|(?:always|still|constantly)\s+be|show(?:s|ed|ing)?|turn(?:s|ed|ing)?(?:\s+(?:in)?to)?|go(?:es|ing)?|went|ha(?:s|ve|d)\s+(?:gone|turned)|(?:is|was|are|were)\s+going|keeps?\s+being|kept\s+being|stay(?:s|ed)?|remain(?:s|ed)?|(?:is|was|are|were)\s+[*_]{{0,2}}(?:always|still|constantly|consistently)|change[sd]?\s+to|jump(?:s|ed)?\s+to|explode[sd]?\s+to|(?:rise[sn]?|rose)\s+to|drop(?:s|ped)?\s+to|approach(?:es|ed)?|reach(?:es|ed)?)\s+(?:(?:to|into|be)\s+)?[*_'"`]{{0,2}}{TOKEN}"#,
            KEY.replacen("(?P<key>", r"(?P<key>(?-u:\b)gradients?(?-u:\b)|", 1)
        ))
        .expect("static regex"),
        caused_state: Regex::new(&format!(
            r#"(?i)\b(?:makes?|made|making|causes?|caused|causing)\s+(?:the\s+|my\s+|our\s+|its\s+)?(?:(?:training|train|validation|val|total)\s+)?{KEY}\s+(?:(?:to\s+)?(?:be|become|go|turn)\s+(?:(?:to|into)\s+)?)?[*_'"`]{{0,2}}{TOKEN}"#
        ))
        .expect("static regex"),
        produced_value: Regex::new(
            r#"(?i)\b(?P<verb>produc(?:es?|ed|ing)|outputs?|outputted|generat(?:es?|ed|ing))\s+(?:only\s+|all\s+|just\s+)?[*_'"`]{0,2}(?-i:NaNs?|nans?|NAN|NANs|Infs?|infs?)(?:'s)?(?P<after>$|[\s.,;:!?)'"`*].{0,40})"#,
        )
        .expect("static regex"),
        // A sentence's supposition or advice also shows in its modal verbs, in a question word
        // and in the verbs of what a guard does with the value.
        hedged: Regex::new(&format!(
            r"(?i)\b(?:{CONDITIONAL}|{GUARDED_OR_NEGATED}|checking|stop|skip\w*|handl\w*|raise|could|might|may|can|will|would|should|why|how|what|reasons?)\b"
        ))
        .expect("static regex"),
        scale_metric: Regex::new(
            r#"(?i)\bloss_scale['"]?(?:\s{0,2}[:=]\s{0,2}|\s{1,2})([0-9][0-9.eE+-]{0,30})"#,
        )
        .expect("static regex"),
    })
}

/// Conditional words, which keep their whole sentence a supposition ("if the loss is nan",
/// "ignore batches where …"): `conditional`'s list, and the first half of `message_prose`'s and
/// `hedged`'s.
const CONDITIONAL: &str = r"if|when|whenever|whether|unless|until|in case|once|where";

/// Words that make a clause about a value a guard or a negation ("avoid nan loss", "no nan
/// loss"): the second half of `message_prose`'s and `hedged`'s lists, after [`CONDITIONAL`].
const GUARDED_OR_NEGATED: &str = r"avoid|prevent|detect\w*|checks?|ignor\w*|no|not|never|without";

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
const BACKWARD_HINT: &str = "Autograd's anomaly mode found NaN in a backward function's output: \
    the traceback above it names the forward operation; look for a division by zero, sqrt/log of \
    0 or a norm of a zero vector there, and add an epsilon.";
const CAFFE_BACKWARD_HINT: &str = "Caffe's debug info shows NaN/inf gradients in a layer's \
    backward pass: the first layer (from the top) whose diff turns non-finite is the culprit; \
    check its inputs and the learning rate, and clip gradients.";
const CAFFE_FORWARD_HINT: &str = "Caffe's debug info shows NaN/inf activations in a layer's \
    forward pass: look at the first layer whose top blob turns non-finite (a log of 0, a division \
    by zero, exploding weights).";
const MONITOR_HINT: &str = "MXNet's monitor shows NaN/inf in an array of the network: look at \
    the first array (in the order the monitor prints them) that turns non-finite, and at the \
    learning rate and the inputs of that batch.";
const PARAM_HINT: &str = "A parameter became NaN/inf after an optimizer step: the gradients \
    blew up; lower the learning rate or clip gradients, and check the inputs of the last batch.";
const VALUE_HINT: &str = "JAX's NaN/inf checking stopped at the first operation that produced a \
    non-finite value (named in the message): look for log(0), sqrt of a negative number or a \
    division by zero there, and for a NaN in the untaken branch of a jnp.where.";
const FOUND_HINT: &str = "A check in the job found a NaN/inf value in the tensor the message \
    names: find the step and layer that first produced it (torch.autograd.set_detect_anomaly or \
    a forward hook that checks torch.isfinite), and check the learning rate, half-precision \
    overflow and the inputs of that step.";
const OUTPUT_HINT: &str = "The model produced NaN/inf outputs (logits, probabilities or an \
    image): in half precision this is usually an overflow; run the model in float32 or bf16 (or \
    upcast the attention), and check the weights and inputs for NaN.";
const SCALE_HINT: &str = "The mixed-precision loss scale collapsed, so every step overflows: the \
    model produces non-finite gradients; check for NaN inputs, lower the learning rate, or try bf16.";

/// The runtimes' own non-finite messages (not every sentence with the word): substring, family,
/// hint. YOLOv5 and Ultralytics "WARNING: non-finite loss, ending training" (train.py); PyTorch's
/// clip_grad_norm_ "The total norm of order 2.0 for gradients from `parameters` is non-finite, so
/// it cannot be clipped" and its earlier FutureWarning "Non-finite norm encountered in
/// torch.nn.utils.clip_grad_norm_" (torch/nn/utils/clip_grad.py); TensorFlow's NanTensorHook
/// ("NanLossDuringTrainingError: NaN loss during training.", training/basic_session_run_hooks.py).
/// TensorFlow's check_numerics on a loss ("LossTensor is inf or nan : Tensor had NaN values",
/// kernels/check_numerics_op.cc) is read after these, in [`parse`].
const RUNTIME_CHECKS: &[(&str, &str, &str)] = &[
    ("non-finite loss", "non_finite_loss", LOSS_HINT),
    // Stable Baselines' `VecCheckNan` wrapper on what passes between the policy and the
    // environments: "ValueError: found nan in actions." and "found inf in observations"
    // (stable_baselines3/common/vec_env/vec_check_nan.py, `_check_val`, "found {nan|inf} in
    // {name}"). Non-finite actions are the policy's output.
    ("found nan in actions", "nan_output", POLICY_HINT),
    ("found inf in actions", "nan_output", POLICY_HINT),
    ("found nan in observations", "non_finite_value", POLICY_HINT),
    ("found inf in observations", "non_finite_value", POLICY_HINT),
    ("found nan in rewards", "non_finite_value", POLICY_HINT),
    ("found inf in rewards", "non_finite_value", POLICY_HINT),
    // Unity ML-Agents' checks of what an agent observed and earned: "An agent had a NaN
    // observation in the environment" (mlagents_envs/rpc_utils.py), "… for brain <name>" and
    // "An agent had a NaN reward." in older releases (mlagents/envs/brain.py).
    ("had a NaN observation", "non_finite_value", POLICY_HINT),
    ("had a NaN reward", "non_finite_value", POLICY_HINT),
    ("loss is non-finite", "non_finite_loss", LOSS_HINT),
    ("Non-finite norm", "nan_grad_norm", GRAD_HINT),
    ("non-finite norm", "nan_grad_norm", GRAD_HINT),
    ("non-finite total norm", "nan_grad_norm", GRAD_HINT),
    (
        "is non-finite, so it cannot be clipped",
        "nan_grad_norm",
        GRAD_HINT,
    ),
    ("NanLossDuringTrainingError", "non_finite_loss", LOSS_HINT),
    // TensorFlow's `NanTensorHook` (tensorflow/python/training/basic_session_run_hooks.py) logs
    // "Model diverged with loss = NaN." before it raises, and OpenNMT-tf raises a RuntimeError
    // with the same words; a title may quote it in parentheses after its own words.
    (
        "Model diverged with loss = NaN",
        "non_finite_loss",
        LOSS_HINT,
    ),
    // A trainer's `math.isfinite(loss)` check in words: 3DETR's "Loss in not finite. Training
    // will be stopped." (main.py / engine.py, typo included, copied by the projects built on
    // it) and the plain "Loss is not finite".
    ("oss in not finite", "non_finite_loss", LOSS_HINT),
    ("oss is not finite", "non_finite_loss", LOSS_HINT),
    // PyTorch Lightning's `terminate_on_nan` check of the step's loss, raised only for a
    // non-finite one: "The loss returned in `training_step` is nan or inf." (0.x,
    // trainer/training_tricks.py) and, later, "… is tensor(nan, device='cuda:0')." with the
    // value (`_check_finite`, the training loop's closure).
    (
        "The loss returned in `training_step` is",
        "non_finite_loss",
        LOSS_HINT,
    ),
    // TensorFlow's clip_by_global_norm: "Found Inf or NaN global norm." (ops/clip_ops.py).
    ("Found Inf or NaN global norm", "nan_grad_norm", GRAD_HINT),
    // PyTorch Lightning's check after a step (`detect_anomaly` / terminate_on_nan): "Detected
    // nan and/or inf values in `c_d1.bias`. Check your forward pass for numerically unstable
    // operations." (lightning/pytorch/utilities/finite_checks.py).
    (
        "Detected nan and/or inf values in",
        "non_finite_parameters",
        PARAM_HINT,
    ),
    // Stable Diffusion web UI's check of a model's output (modules/devices.py,
    // `test_for_nans`): "NansException: A tensor with all NaNs was produced in Unet." (later
    // "A tensor with NaNs was produced in VAE."), raised when a half-precision model produces
    // NaN; and torch.multinomial's host-side check of the probabilities it samples from,
    // "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"
    // (aten/src/ATen/native/Distributions.cpp), which generation reaches when the model's
    // logits are non-finite. The CUDA kernel's own assertion of the same words is a device
    // assert (`multinomial_invalid_probability`).
    (" NaNs was produced in", "nan_output", OUTPUT_HINT),
    // torch.distributions' validation of a distribution's parameters, which a policy or a
    // probabilistic head hits when its network outputs NaN: "ValueError: Expected parameter loc
    // (Tensor of shape (1, 50)) of distribution Normal(…) to satisfy the constraint Real(), but
    // found invalid values:" (torch/distributions/distribution.py, `Distribution.__init__`;
    // before PyTorch 1.8 "The parameter loc has invalid values", `DISTRIBUTION_PARAMETER_CHECK`).
    // A negative scale fails the same check, which the hint says.
    ("but found invalid values", "nan_output", DISTRIBUTION_HINT),
    (
        "The parameter {} has invalid values",
        "nan_output",
        DISTRIBUTION_HINT,
    ),
    // The same check by the words of its first half, where a paste or a title cut the sentence
    // before "but found invalid values".
    (
        "Error: Expected parameter ",
        "nan_output",
        DISTRIBUTION_HINT,
    ),
    // torch.normal's check of its standard deviation (aten/src/ATen/native/
    // DistributionTemplates.h, `CHECK_NORMAL_TENSOR_STD`: "normal expects all elements of std
    // >= 0.0"; `CHECK_NORMAL_STD`: "normal expects std >= 0.0, but found std nan"): a NaN fails
    // the comparison, and a Gaussian policy's `sample()` is where a NaN log-std from its
    // network surfaces first.
    ("Error: normal expects", "nan_output", DISTRIBUTION_HINT),
    (" NaN's was produced in", "nan_output", OUTPUT_HINT),
    (
        "Error: probability tensor contains either",
        "nan_output",
        OUTPUT_HINT,
    ),
    // NumPy 1.24 and later flag a NaN or an infinity that a cast to an integer type meets:
    // "RuntimeWarning: invalid value encountered in cast" (NumPy 1.24.0 release notes, "NumPy
    // now gives floating point errors in casts"). Image pipelines hit it converting a model's
    // output to 8-bit pixels (`np.clip(255. * image, 0, 255).astype(np.uint8)` in diffusion
    // UIs), which is where a half-precision model's NaN output shows as a black image. Only the
    // cast: NumPy's same warning for a division or a square root is arithmetic on data, not a
    // non-finite value reaching an output.
    ("invalid value encountered in cast", "nan_output", CAST_HINT),
    // JAX with jax_debug_nans / jax_debug_infs: "FloatingPointError: invalid value (nan)
    // encountered in dot_general" (jax/_src/dispatch.py). NumPy's own RuntimeWarning ("invalid
    // value encountered in divide") has no parenthesised value and is not matched.
    (
        "invalid value (nan) encountered in",
        "non_finite_value",
        VALUE_HINT,
    ),
    (
        "invalid value (inf) encountered in",
        "non_finite_value",
        VALUE_HINT,
    ),
    // fairseq's trainer when the gradients' norm is not finite: "FloatingPointError: gradients
    // are Nan/Inf" (fairseq/trainer.py, `train_step`), and the NaN detector it then runs over
    // the step, one warning per module: "NaN detected in output of decoder.layers.3, shape:
    // torch.Size([…]), forward" (fairseq/nan_detector.py, `_detect`; "backward" for a
    // gradient).
    ("Error: gradients are Nan/Inf", "nan_grad_norm", GRAD_HINT),
    (
        " NaN detected in output of",
        "non_finite_value",
        NAN_DETECTOR_HINT,
    ),
    (
        " Inf detected in output of",
        "non_finite_value",
        NAN_DETECTOR_HINT,
    ),
    // Physics engines whose state went non-finite. MuJoCo (also under MJX, Brax, dm_control,
    // gymnasium): "WARNING: Nan, Inf or huge value in QACC at DOF 0. The simulation is
    // unstable. Time = 0.1200." (mujoco/src/engine/engine_support.c, `mju_warningText`, also
    // QPOS, QVEL and CTRL at ACTUATOR); MuJoCo resets the state and goes on, so a policy that
    // produced the value keeps producing it. OpenMM: "OpenMMException: Particle coordinate is
    // nan" ("NaN" in later releases; openmmapi/src/ContextImpl.cpp and the platforms' checks of
    // positions).
    (
        "Nan, Inf or huge value in ",
        "simulation_unstable_nan",
        SIMULATION_HINT,
    ),
    (
        "Particle coordinate is nan",
        "simulation_unstable_nan",
        SIMULATION_HINT,
    ),
    (
        "Particle coordinate is NaN",
        "simulation_unstable_nan",
        SIMULATION_HINT,
    ),
    // OpenMM's Python app checks the positions it writes out: "ValueError: Particle position is
    // NaN" and "… is infinite" (openmm/app/pdbfile.py and pdbxfile.py, `writeModel`), which a
    // reporter reaches when the simulation blew up since its last report. Project Chrono's fluid
    // solver prints "Error! particle position is NAN: thrown from ChFluidDynamics.cu, …"
    // (src/chrono_fsi, its CUDA kernels' check of the updated positions).
    (
        "Particle position is NaN",
        "simulation_unstable_nan",
        SIMULATION_HINT,
    ),
    (
        "Particle position is infinite",
        "simulation_unstable_nan",
        SIMULATION_HINT,
    ),
    (
        "particle position is NAN",
        "simulation_unstable_nan",
        SIMULATION_HINT,
    ),
    // PyTorch's linear algebra raises for an SVD whose LAPACK/cuSOLVER call returned info -4:
    // "linalg.svd: The algorithm failed to converge because the input matrix contained
    // non-finite values." (aten/src/ATen/native/LinearAlgebraUtils.h, `_linalg_check_errors`).
    // The matrix came from the model or its data: the values were NaN or inf before the call.
    (
        "failed to converge because the input matrix contained non-finite values",
        "non_finite_value",
        LINALG_HINT,
    ),
];

const LINALG_HINT: &str = "A linear-algebra routine (an SVD, an eigendecomposition) got a matrix \
     with NaN or inf in it: the values went non-finite before the call. Find where (check the \
     inputs and the layer that builds the matrix for NaN, torch.autograd.set_detect_anomaly), \
     lower the learning rate, or compute that step in fp32.";

const CAST_HINT: &str = "NumPy met NaN or inf converting an array to integers, usually a model's \
     output on its way to 8-bit pixels (a black or blank image): the model produced non-finite \
     values; in half precision run the VAE or attention in fp32 (an upcast or no-half option), or \
     check the inputs, guidance and learning rate.";

const NAN_DETECTOR_HINT: &str = "fairseq's NaN detector found a non-finite tensor in the output \
     (forward) or gradient (backward) of the module it names; the first module named is where \
     values first went non-finite: check that layer's inputs, lower the learning rate, clip \
     gradients, or run that layer in fp32 or bf16.";

const NAN_TENSOR_HINT: &str = "A tensor printed in the log is NaN throughout (a debugging print \
    of an output or a gradient): find the first operation whose output turns non-finite \
    (torch.autograd.set_detect_anomaly for gradients) and check its inputs, the learning rate and \
    the precision.";

/// Is the line the first row of a tensor that PyTorch prints NaN in every place of ("at FA3 dq
/// is : tensor([nan, nan, nan, …"; its repr fills about 80 columns a row)? Twelve or more, so
/// that a documentation example of a small NaN tensor (`tensor([nan, nan, nan])`) is no event;
/// or the summary PyTorch prints of a tensor of more than a thousand elements, three at each end
/// of a row around `...` (`torch.set_printoptions`' `threshold` and `edgeitems`), all NaN:
/// "std = tensor([[nan, nan, nan,  ..., nan, nan, nan],". A tensor of two or more dimensions
/// (`tensor([[[nan, nan, …`) with eight or more in its first row is a model's output printed
/// whole, its last dimension narrower than a row: examples print small vectors.
///
/// NumPy prints the same without commas: a row of twelve or more (`[nan nan nan nan …`), or its
/// summary of a large array, three at each end around `...` ("Output for disp: [[[[nan nan
/// nan ... nan nan nan]", numpy's `threshold` and `edgeitems`).
fn nan_tensor(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    static NUMPY: OnceLock<Regex> = OnceLock::new();
    (line.contains("tensor([")
        && super::prose::cached(
            &R,
            r"\btensor\(\[+\s*(?:(?:nan,\s*){11,}nan\b|(?:nan,\s*){3}\.\.\.,\s*(?:nan,\s*){2}nan\b)|\btensor\(\[\[+\s*(?:nan,\s*){7,}nan\b",
        )
        .is_match(line))
        || (line.contains("[nan ")
            && super::prose::cached(
                &NUMPY,
                r"(?:^|[^\w(])\[+\s*(?:(?:nan\s+){11,}nan\b|(?:nan\s+){2}nan\s+\.\.\.\s+(?:nan\s+){2}nan\])",
            )
            .is_match(line))
}

const POLICY_HINT: &str = "A reinforcement-learning loop passed a non-finite value between the \
     policy and its environments: NaN actions come from the policy network (check its loss, \
     learning rate and log-std), NaN observations or rewards from the environment or the \
     simulator (check its state and the actions it was given); clip actions and normalise \
     observations.";

const SIMULATION_HINT: &str = "The physics simulation's state became NaN, infinite or huge: \
     the controls or forces it was given were non-finite or too large for its time step (a \
     policy that outputs NaN or unbounded actions), or the model is unstable (stiff contacts, \
     bad initial positions). Check the actions and observations for NaN, clip actions, reduce \
     the time step or minimise energy before dynamics.";

const DISTRIBUTION_HINT: &str = "A torch.distributions distribution got a parameter outside \
     its constraint, nearly always NaN from the network that computes it (a policy's mean or \
     log-std, logits): find the first non-finite activation or loss (torch.autograd.\
     set_detect_anomaly, a lower learning rate, gradient clipping); a negative scale fails the \
     same check.";

/// Checks that say the loss was NaN *or* inf without saying which: Keras' TerminateOnNaN
/// callback ("Batch 12: Invalid loss, terminating training", keras/callbacks.py) and MindSpore's
/// LossMonitor ("epoch: 1 step: 5. Invalid loss, terminating training.",
/// mindspore/train/callback/_loss_monitor.py). Read last, after any value on the line. The loss
/// is non-finite either way; the family is a guess ([`PROVISIONAL_RULE`]) that the progress line
/// printing the value, which follows, makes exact (`inf_loss`).
const UNSPECIFIED_LOSS_CHECKS: &[(&str, &str, &str)] = &[(
    "Invalid loss, terminating training",
    "non_finite_loss",
    LOSS_HINT,
)];

/// tensorboardX's `check_nan` on every value a script logs (tensorboardX/x2num.py, `make_np`):
/// "WARNING:root:NaN or Inf found in input tensor." It names no value; a script's logged scalars
/// are its loss first of all, so the family is the loss's until a line that prints the value
/// names it ([`PROVISIONAL_RULE`]).
const LOGGED_VALUE_CHECKS: &[(&str, &str, &str)] = &[(
    "NaN or Inf found in input tensor",
    "non_finite_loss",
    LOSS_HINT,
)];

/// The rule name of a numeric family that is a guess: the incident it opens takes the family of
/// the next numeric line that names its value (a `grad_norm: nan`, a collapsing loss scale).
pub const PROVISIONAL_RULE: &str = "non_finite_logged_value";

/// Loss scalers that give up: DeepSpeed "Current loss scale already at minimum - cannot
/// decrease scale anymore." (deepspeed/runtime/fp16/loss_scaler.py), fairseq "Minimum loss
/// scale reached (0.0001). Your loss is probably exploding." (fairseq/optim/
/// dynamic_loss_scaler.py).
const SCALER_CHECKS: &[(&str, &str, &str)] = &[
    (
        "oss scale already at minimum",
        "loss_scale_collapse",
        SCALE_HINT,
    ),
    (
        "Minimum loss scale reached",
        "loss_scale_collapse",
        SCALE_HINT,
    ),
    // The same message's head as the exception line shows it, which a paste of fairseq's
    // traceback can separate from the rest of the sentence.
    (
        "FloatingPointError: Minimum loss",
        "loss_scale_collapse",
        SCALE_HINT,
    ),
    // k2/icefall's recipes stop once torch.amp's grad scaler has halved its scale below 1e-5:
    // "RuntimeError: grad_scale is too small, exiting: 1.29e-26" (egs/*/train.py,
    // `train_one_epoch`).
    (
        "rror: grad_scale is too small",
        "loss_scale_collapse",
        SCALE_HINT,
    ),
];

/// Read after check_numerics: Megatron-LM's checks before the gradient all-reduce ("found NaN in
/// local grad norm in backward pass before data-parallel communication collective", "found NaN
/// in local forward loss calculation", megatron/core) and autograd's anomaly mode ("Function
/// 'MulBackward0' returned nan values in its 0th output.", torch/csrc/autograd/engine.cpp,
/// checked when torch.autograd.set_detect_anomaly is on).
const LATE_RUNTIME_CHECKS: &[(&str, &str, &str)] = &[
    ("found NaN in local grad norm", "nan_grad_norm", GRAD_HINT),
    ("found Inf in local grad norm", "nan_grad_norm", GRAD_HINT),
    (
        "found NaN in local forward loss",
        "non_finite_loss",
        LOSS_HINT,
    ),
    (
        "found Inf in local forward loss",
        "non_finite_loss",
        LOSS_HINT,
    ),
    (
        "returned nan values in its",
        "nan_in_backward",
        BACKWARD_HINT,
    ),
];

/// The first message of `checks` on `line`, if any: its family, or `None` inside when the line is
/// a sentence that names the message in passing (`detect::prose`).
fn runtime_message(
    line: &str,
    checks: &[(&str, &'static str, &'static str)],
) -> Option<Option<Evidence>> {
    let (hit, &(_, category, hint)) = checks
        .iter()
        .find_map(|c| find_message(line, c.0).map(|at| (at, c)))?;
    let hits = std::slice::from_ref(&hit);
    if super::prose::names_error_in_passing(line, hits)
        || super::code::holds_error_in_code(line, hits)
    {
        return Some(None);
    }
    Some(Some(headline(category, hint)))
}

/// Where `message` is on `line`: the literal, or for a format with one `{}` (a name the program
/// fills in: "The parameter {} has invalid values") its two pieces with one word between them.
fn find_message(line: &str, message: &str) -> Option<std::ops::Range<usize>> {
    let Some((head, tail)) = message.split_once("{}") else {
        return line.find(message).map(|at| at..at + message.len());
    };
    line.match_indices(head).find_map(|(at, _)| {
        let rest = &line[at + head.len()..];
        let word = rest
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        (word > 0 && rest[word..].starts_with(tail))
            .then(|| at..at + head.len() + word + tail.len())
    })
}

/// Megatron-LM's rejected result ([`Patterns::unexpected`]) in the shapes it prints: after
/// "iteration N: " (the RuntimeError), followed by " on rank " or by its " (message='…')", or alone
/// as a report's title ("Unexpected result nan？"). The words alone are any test's ("AssertionError:
/// Unexpected result nan for input x=-1").
fn megatron_validation(line: &str) -> Option<Evidence> {
    static ITERATION: OnceLock<Regex> = OnceLock::new();
    let c = patterns().unexpected.captures(line)?;
    let (m, tok, rest) = (c.get(0)?, c.name("tok")?, c.name("rest")?.as_str());
    let before = &line[..m.start()];
    let tail = rest
        .strip_prefix(", device=")
        .and_then(|r| r.split_once(')').map(|(_, t)| t))
        .unwrap_or(rest);
    let tail = tail.strip_prefix(')').unwrap_or(tail);
    let shaped = super::prose::cached(&ITERATION, r"iteration #?\d+: $").is_match(before)
        || tail.starts_with(" (message=")
        || tail.starts_with(" on rank ")
        || (before.trim().is_empty()
            && rest
                .trim_matches(|c: char| c.is_whitespace() || "?!.\u{ff1f}\u{ff01}".contains(c))
                .is_empty());
    if !shaped {
        return None;
    }
    // The check's message, where the line keeps it, says which value it was.
    Some(
        if rest.contains("grad norm") || rest.contains("grad_norm") {
            headline("nan_grad_norm", GRAD_HINT)
        } else {
            loss_headline(tok.as_str(), false)
        },
    )
}

/// `e` as a guess of its family ([`PROVISIONAL_RULE`]).
fn provisional(e: Evidence) -> Evidence {
    match e {
        Evidence::Headline {
            kind,
            category,
            blame,
            hint,
            ..
        } => Evidence::Headline {
            kind,
            category,
            blame,
            hint,
            rule: PROVISIONAL_RULE.into(),
        },
        other => other,
    }
}

/// Returns numeric evidence for a line, or `None`.
pub fn parse(line: &str, min_loss_scale: f64) -> Option<Evidence> {
    let p = patterns();
    if let Some(Some(e)) = runtime_message(line, RUNTIME_CHECKS) {
        return Some(e);
    }
    if line.contains("Tensor had NaN values") || line.contains("Tensor had Inf values") {
        if line.contains("oss") {
            return Some(if line.contains("had Inf") {
                headline("inf_loss", INF_HINT)
            } else {
                headline("non_finite_loss", LOSS_HINT)
            });
        }
        // A check of the gradients ("Gradient for bert/embeddings/LayerNorm/gamma:0 is NaN :
        // Tensor had NaN values", `tf.debugging.check_numerics` over each gradient in BERT's and
        // ALBERT's optimisers): the check's own message names what it checked.
        if line.contains("radient") {
            return Some(headline("nan_grad_norm", GRAD_HINT));
        }
        return None;
    }
    if let Some(Some(e)) = runtime_message(line, LATE_RUNTIME_CHECKS) {
        return Some(e);
    }
    if let Some(e) = megatron_validation(line) {
        return Some(e);
    }
    if nan_tensor(line) {
        // A metrics dict's entry before the tensor ("'grad_norm': nan —— last_hidden_state:
        // tensor([[[nan, nan, …") names what went non-finite; the tensor is what the writer
        // printed to find out where.
        let tensor_at = line
            .find("tensor([")
            .or_else(|| line.find("[nan "))
            .unwrap_or(line.len());
        let entry = p.keyed.captures(&line[..tensor_at]).filter(|c| {
            c.name("key")
                .is_some_and(|k| matches!(line[..k.start()].chars().next_back(), Some('\'' | '"')))
        });
        return match entry {
            Some(c) => value_headline(&c, false),
            None => Some(headline("non_finite_value", NAN_TENSOR_HINT)),
        };
    }
    if let Some(e) = runtime_message(line, LOGGED_VALUE_CHECKS) {
        return e.map(provisional);
    }
    if line.contains("infinite or NaN") && line.to_ascii_lowercase().contains("loss") {
        return Some(headline("non_finite_loss", LOSS_HINT));
    }
    // A scaler's message decides the line, also when a sentence only names it.
    if let Some(e) = runtime_message(line, SCALER_CHECKS) {
        return e;
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
    // A scale printed as a metric is not a change, so only a value below the floor is a
    // collapse: a bf16 or static-scale run prints 1.0 on every line, a dynamic fp16 scaler
    // starts far above it (2^7 in fairseq, 2^16 in Apex and torch.amp).
    if let Some(c) = p.scale_metric.captures(line) {
        if let Ok(v) = c[1].trim_end_matches('.').parse::<f64>() {
            // `"loss_scale": 0,` alone on its line is a configuration's entry, not a reading: 0
            // asks DeepSpeed, Megatron-LM and HF's Trainer for dynamic loss scaling, and a
            // pretty-printed JSON or YAML configuration puts each key on a line of its own
            // (DeepSpeed prints its whole `json = {…}` that way at start-up).
            if lone_entry(line) {
                return None;
            }
            if v < min_loss_scale {
                return Some(headline("loss_scale_collapse", SCALE_HINT));
            }
        }
    }
    if let Some(c) = p.yolo_row.captures(line) {
        return Some(loss_headline(c.name("tok")?.as_str(), false));
    }
    if let Some(c) = p.table_row.captures(line) {
        return value_headline(&c, false);
    }
    if let Some(c) = p.mxnet_monitor.captures(line) {
        let name = c.name("name").map_or("", |m| m.as_str());
        return Some(if name.contains("backward") {
            headline("nan_in_backward", MONITOR_HINT)
        } else if name.ends_with("_weight") || name.ends_with("_bias") {
            headline("non_finite_parameters", PARAM_HINT)
        } else {
            headline("non_finite_value", MONITOR_HINT)
        });
    }
    if let Some(c) = p.caffe_debug.captures(line) {
        return Some(match c.name("pass").map(|m| m.as_str()) {
            Some("Backward") => headline("nan_in_backward", CAFFE_BACKWARD_HINT),
            Some("Update") => headline("non_finite_parameters", PARAM_HINT),
            _ => headline("non_finite_value", CAFFE_FORWARD_HINT),
        });
    }
    // The key and its value. `keyed` is a log's or a metrics dict's shape and stands on its
    // own; the bare and verbal forms also occur in sentences ("if the loss is nan, …"), so a
    // line with a conditional or descriptive word before the key is prose, not an event.
    // A line that prints both a loss and a gradient norm (mmengine: `grad_norm: nan  loss: nan`)
    // is the loss's family: a non-finite loss makes the gradients non-finite, not the reverse.
    // A value quoted as code in a sentence that says someone met it ("I encountered `loss=inf`
    // at the 3rd epoch") is a report, whatever words come before it.
    // A commit subject or pull-request title about a value ("Fix loss=nan with bf16", "Adding
    // comment to ignore loss=nan value") announces a change, not a run; a line of source that
    // is only a string literal is a message's text, not its output.
    if super::prose::announces_a_fix(line) || super::code::literal_line(line) {
        return None;
    }
    // Each of the line-wide checks runs once, not once per candidate value: a line of
    // thousands of `loss: nan` pairs stays linear.
    // Where the line's first report cue ends, found once for both checks that read it.
    let cue_end = std::cell::OnceCell::new();
    let first_cue_end = || -> Option<usize> {
        *cue_end.get_or_init(|| super::prose::report_cue().find(line).map(|c| c.end()))
    };
    let reported_code = |m: regex::Match| {
        line[..m.start()].ends_with('`')
            && (m.as_str().ends_with('`') || line[m.end()..].starts_with('`'))
            && first_cue_end().is_some()
    };
    // Where the first conditional or descriptive word ends: prose comes before a value when one
    // ends at or before it.
    let prose_end = p.prose.find(line).map(|m| m.end());
    // A program's message behind a log level ("WARNING: Skip the batch due to the loss is NaN",
    // quoted in a report too) is output, whatever words of a sentence it has; the print
    // statement that writes it is code.
    let message = level_message(line)
        .filter(|r| !super::code::holds_error_in_code(line, std::slice::from_ref(r)));
    let message_prose_end = message
        .as_ref()
        .and_then(|r| p.message_prose.find_at(line, r.start))
        .map(|m| m.end());
    let metric_runs = std::cell::OnceCell::new();
    // A value right after someone says they met it ("I am getting Loss nan, top1 98.00", "we got
    // grad_norm nan"): a report in the writer's words, unless a conditional, a negation or a
    // verb of avoiding comes first ("if you get loss nan", "I never got loss nan").
    // A clause that ", but" or ";" opens ends a negation before it ("the script throws no error,
    // but loss=nan …" tells what happened), unless a condition came first ("if you see no error,
    // but …") or a modal verb follows the break ("…, but loss=nan can still happen"). The
    // offsets are found once per line and searched by position (see [`Reach`]).
    let reach = std::cell::OnceCell::new();
    let supposed_before = |at: usize| reach.get_or_init(|| Reach::of(line)).covers(at);
    let reported_in_prose = |m: regex::Match| {
        first_cue_end().is_some_and(|e| e <= m.start()) && !supposed_before(m.start())
    };
    let sentence = |c: &regex::Captures| {
        c.get(0).is_some_and(|m| match &message {
            Some(r) if r.start <= m.start() && m.end() <= r.end => {
                message_prose_end.is_some_and(|e| e <= m.start())
            }
            _ => {
                !reported_code(m)
                    && !reported_in_prose(m)
                    && !metric_runs
                        .get_or_init(|| metric_runs_of(line))
                        .iter()
                        .any(|r| r.start <= m.start() && m.end() <= r.end + 1)
                    && (prose_end.is_some_and(|e| e <= m.start())
                        || p.prose_after.is_match(&line[m.end()..]))
            }
        })
    };
    // A key in quotes before its value (`'grad_norm': nan`) is an entry of a printed dict, and a
    // key and value quoted together (`"loss:inf"`) a quoted piece of a log line, in a sentence
    // too ("Im getting 'grad_norm': nan, 'learning_rate': 0.0 during GRPO", "\"loss:inf\"
    // appears"). A quotation that opens before the key and closes elsewhere is not one.
    let dict_entry = |c: &regex::Captures| {
        let (Some(k), Some(t)) = (c.name("key"), c.name("tok")) else {
            return false;
        };
        let open = line[..k.start()].chars().next_back();
        let closes_at = |at: usize| line[at..].chars().next() == open;
        matches!(open, Some('\'' | '"')) && (closes_at(k.end()) || closes_at(t.end()))
    };
    // A key glued to its value by `=` (`avr_loss=nan`, the way a progress bar's postfix or a
    // metrics line prints it) is a quoted piece of the writer's log inside a sentence too ("the
    // avr_loss=nan comes to nan"), unless a condition or a negation comes first ("stop when
    // loss=nan").
    let glued = |c: &regex::Captures| {
        let (Some(k), Some(t)) = (c.name("key"), c.name("tok")) else {
            return false;
        };
        line.get(k.end()..t.start()) == Some("=")
            && line[..k.start()]
                .chars()
                .next_back()
                .is_none_or(char::is_whitespace)
            && !supposed_before(k.start())
    };
    // The first loss value, else the first value of any key.
    let mut keyed: Option<regex::Captures> = None;
    for c in p
        .keyed
        .captures_iter(line)
        .filter(|c| dict_entry(c) || glued(c) || !sentence(c))
    {
        if is_loss(&c) {
            keyed = Some(c);
            break;
        }
        keyed.get_or_insert(c);
    }
    let hit = keyed.or_else(|| {
        [&p.bare, &p.verbal]
            .into_iter()
            .find_map(|re| re.captures(line).filter(|c| !sentence(c)))
    });
    let Some(hit) = hit else {
        let Some(g) = p.group.captures(line).filter(|c| !sentence(c)) else {
            // "WARNING: received a nan loss, setting loss value to 0" (deepspeech.pytorch's
            // trainer): the value before its key, in a message only.
            if let Some(c) = message.as_ref().and_then(|r| {
                let text = &line[r.clone()];
                p.adjectival
                    .captures(text)
                    .or_else(|| p.message_adjectival.captures(text))
                    .filter(|c| {
                        !p.message_prose
                            .is_match(&text[..c.get(0).map_or(0, |m| m.start())])
                    })
            }) {
                return value_headline(&c, false);
            }
            // A cell of a Markdown table ("| the loss goes NaN | lr too high |", "| Detected NaN
            // loss | … |", a runbook's symptoms) describes a case; a logger's table of values is
            // `table_row`'s.
            let table_cells = {
                let t = line.trim();
                t.len() > 1 && t.starts_with('|') && t.ends_with('|')
            };
            if table_cells {
                return None;
            }
            if let Some(c) = p.detected.captures(line).or_else(|| {
                p.detected_first
                    .captures(line)
                    .filter(|c| c.name("key").is_some_and(|k| !asked(&line[k.end()..])))
            }) {
                return value_headline(&c, false);
            }
            if message
                .as_ref()
                .is_some_and(|r| p.message_found.is_match(&line[r.clone()]))
            {
                return Some(headline("non_finite_value", FOUND_HINT));
            }
            // "I keep getting Nan loss at around 40 epochs": the value before its key in the
            // writer's report, with nothing hypothetical before it ("for some reason I receive
            // NaNs for the loss" says the writer cannot explain it, [`unexplained`]).
            if let Some(c) = p.adjectival.captures(line).filter(|c| {
                c.get(0).is_some_and(|m| {
                    super::prose::has_report_cue(line)
                        && !p.hedged.is_match(&unexplained(&line[..m.start()]))
                }) && !names_the_scaler(c, line)
            }) {
                return value_headline(&c, false);
            }
            // "after several iterations, the training loss became Nan": what happened to a value
            // in the writer's run, told as a sentence with nothing hypothetical before it; also
            // what made it so ("`torch.compile()` makes the loss nan"), unless the sentence
            // tells of a fix ("fixes a bug that makes the loss nan").
            let caused = || {
                p.caused_state
                    .captures(line)
                    .filter(|c| !fix_before(&line[..c.get(0).map_or(0, |m| m.start())]))
            };
            if let Some(c) = [p.changed_state.captures(line), caused()]
                .into_iter()
                .flatten()
                .find(|c| {
                    // The words between the key and the verb count too ("the loss never spikes
                    // and goes NaN"), and a question stays one ("Does the loss go NaN …?").
                    c.name("tok").is_some_and(|t| {
                        !p.hedged.is_match(&own_conditions(&line[..t.start()]))
                            && !asked(&line[t.end()..])
                    }) && !super::prose::second_person_scenario(line)
                })
            {
                return value_headline(&c, false);
            }
            // "torch.compile on the model produces NaNs": what the writer's run put out, with
            // nothing hypothetical before it and no condition or verdict after it ("… produces
            // NaN if the input is negative", "… which is expected"). A statement in the present
            // needs a report's cue or a model as its subject: "acos outputs NaN outside [-1, 1]"
            // is arithmetic's rule, not a run. A loss before or after the value ("the loss
            // function produces NaN", "… produces NaN losses") is the loss forms' to read.
            if p.produced_value.captures(line).is_some_and(|c| {
                let before = &line[..c.get(0).map_or(0, |m| m.start())];
                !p.hedged.is_match(&own_conditions(before))
                    && !fix_before(before)
                    && !c
                        .name("after")
                        .is_some_and(|a| conditioned(a.as_str()) || names_a_key(a.as_str()))
                    && !before.to_ascii_lowercase().contains("loss")
                    && !super::prose::second_person_scenario(line)
                    && (super::prose::has_report_cue(line)
                        || c.name("verb").is_some_and(|v| v.as_str().ends_with("ed"))
                        || model_subject(before))
            }) {
                return Some(headline("nan_output", OUTPUT_HINT));
            }
            return runtime_message(line, UNSPECIFIED_LOSS_CHECKS)
                .flatten()
                .map(provisional);
        };
        return Some(loss_headline(g.name("tok")?.as_str(), false));
    };
    let tok = hit.name("tok")?;
    // "Loss is inf or nan" (TensorFlow's check_numerics message for a loss) says either.
    let either = p.or_nan.is_match(&line[tok.end()..]);
    value_headline(&hit, either)
}

/// Is the key of `c` the loss scaler's ("inf in loss scaling", "nan loss scale")? An overflow
/// the scaler meets is what it is there for, not a non-finite loss.
fn names_the_scaler(c: &regex::Captures, line: &str) -> bool {
    c.name("key").is_some_and(|k| {
        line[k.end()..]
            .trim_start_matches([' ', '_', '-'])
            .get(..4)
            .is_some_and(|w| w.eq_ignore_ascii_case("scal"))
    })
}

/// Does `text`, what follows a value a sentence says was produced, put a condition or a verdict
/// on it ("… if the input is negative", "… values when …", "… outside [-1, 1]", "…, which is
/// expected", "… by design")?
fn conditioned(text: &str) -> bool {
    static R: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    super::prose::cached(
        &R,
        r"(?i)^\W{0,3}\s*(?:(?:values?|outputs?|results?)\s+)?(?:if|when|whenever|unless|outside|for\s+(?:negative|invalid|empty|zero)|on\s+(?:negative|invalid|empty)|as\s+expected|by\s+design)\b|\b(?:expected|correct|intended|by design)\b",
    )
    .is_match(text)
}

/// Does `text`, what follows a produced value, open with a key the other forms read ("NaN
/// losses", "NaN loss", "NaN grad norms")?
fn names_a_key(text: &str) -> bool {
    let t = text
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .to_ascii_lowercase();
    t.starts_with("loss") || t.starts_with("grad")
}

/// Does `text` name a model or a training run as what put a value out ("the quantized model",
/// "torch.compile on …", "the fine-tuned encoder")? Such a subject makes a present-tense
/// sentence about a produced value a report of a run.
fn model_subject(text: &str) -> bool {
    static R: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    super::prose::cached(
        &R,
        r"(?i)\b(?:models?|network|net|layers?|encoder|decoder|unet|vae|transformer|training|compiled?|torch\.compile|checkpoint|fine-?tun\w*|inference|pipeline)\b",
    )
    .is_match(text)
}

/// Does `text` tell of a fix ("fixes a bug that …", "Fixed the mask that …", "resolves an issue
/// where …", "bugfix: …")? A sentence about what a fix removed names a failure that no longer
/// happens. "fixed" before a noun ("with a fixed seed") is an adjective and says nothing of it.
fn fix_before(text: &str) -> bool {
    static R: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    super::prose::cached(
        &R,
        r"(?i)\b(?:fix(?:es|ed)?|resolve[sd]?)\s+(?:a|an|the|this|that|these|those|bugs?|issues?|problems?)\b|\bbug\s?fix\b",
    )
    .is_match(text)
}

/// The end of a sentence: a full stop, an exclamation or a question mark before a space or the
/// end of the line.
fn sentence_end() -> &'static Regex {
    static R: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    super::prose::cached(&R, r"[.!?](?:\s|$)")
}

/// Where a new clause opens that a negation before it does not reach: "but" after a
/// comma ("no error is thrown, but …") and a semicolon. A condition reaches past it.
fn clause_breaks() -> &'static Regex {
    static R: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    super::prose::cached(&R, r"(?i),\s*but\b|;\s")
}

/// Does `rest`, what follows a value or a key, end its clause with a question mark ("Does the
/// loss go NaN with bf16 as well?")? A question in a clause of its own after a comma asks about
/// what was reported ("my loss is always nan, how can I fix it?").
fn asked(rest: &str) -> bool {
    rest.find(['.', '!', '?', ',', ';'])
        .is_some_and(|i| rest[i..].starts_with('?'))
}

/// Longest line whose negations [`Reach`] tracks clause by clause: far more than any sentence or
/// paragraph; past it (a 100 MB line is input too) only the first word counts, to the line's end,
/// and no offsets are kept.
const CLAUSE_LINE_MAX: usize = 64 * 1024;

/// Where the words that make a value hypothetical or negated end on a line, and where the clauses
/// that a negation does not reach open.
struct Reach {
    /// Ends of `message_prose`'s words (conditions, negations, verbs of avoiding).
    words: Vec<usize>,
    /// Ends of the clause breaks (", but", "; ").
    breaks: Vec<usize>,
    /// Starts of modal verbs, which keep advice advice after a break.
    modals: Vec<usize>,
    /// Ends of sentences (a full stop, an exclamation or a question mark before a space).
    sentence_ends: Vec<usize>,
    /// Start of the line's first conditional word.
    condition: Option<usize>,
}

impl Reach {
    fn of(line: &str) -> Self {
        let p = patterns();
        if line.len() > CLAUSE_LINE_MAX {
            return Reach {
                words: p
                    .message_prose
                    .find(line)
                    .map(|m| m.end())
                    .into_iter()
                    .collect(),
                breaks: Vec::new(),
                modals: Vec::new(),
                sentence_ends: Vec::new(),
                condition: None,
            };
        }
        static MODAL: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
        let modal = super::prose::cached(
            &MODAL,
            r"(?i)\b(?:can|cannot|can't|could|may|might|will|won't|would|should|must)\b",
        );
        Reach {
            words: p.message_prose.find_iter(line).map(|m| m.end()).collect(),
            breaks: clause_breaks().find_iter(line).map(|m| m.end()).collect(),
            modals: modal.find_iter(line).map(|m| m.start()).collect(),
            sentence_ends: sentence_end().find_iter(line).map(|m| m.start()).collect(),
            condition: p.conditional.find(line).map(|m| m.start()),
        }
    }

    /// Does a word before byte `at`, in its clause or reaching into it, make the value there
    /// hypothetical or negated? A modal verb anywhere in the value's clause ("…, but loss=nan can
    /// still happen") keeps the words before the break in reach.
    fn covers(&self, at: usize) -> bool {
        let clause = self.breaks.partition_point(|&b| b <= at);
        let mut from = clause.checked_sub(1).map_or(0, |i| self.breaks[i]);
        if from > 0 {
            let next_break = self.breaks.get(clause).copied().unwrap_or(usize::MAX);
            let sentence_end = self.sentence_ends
                [self.sentence_ends.partition_point(|&e| e < at)..]
                .first()
                .copied()
                .unwrap_or(usize::MAX);
            let clause_end = next_break.min(sentence_end);
            let modal = self.modals.partition_point(|&m| m < from);
            if self.condition.is_some_and(|c| c < from)
                || self.modals.get(modal).is_some_and(|&m| m < clause_end)
            {
                from = 0;
            }
        }
        let first = self.words.partition_point(|&e| e <= from);
        self.words.get(first).is_some_and(|&e| e <= at)
    }
}

/// `text` without the conditions the writer puts on their own run ("when I set
/// `distance_influence` to none, the loss becomes NaN", "if I use it for clusters of different
/// sizes, the losses become nan"): what they did, and a report of what followed, not a
/// supposition. "When" or "while" before a verb's -ing form tells what the run was doing ("When
/// trying to teach mGPT through a notebook, after a while loss equals \"nan\"", "When
/// fine-tuning XTTS_v2 …"), and "for some reason" says the writer cannot explain what they saw
/// ([`unexplained`]).
fn own_conditions(text: &str) -> std::borrow::Cow<'_, str> {
    static R: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        Regex::new(&format!(
            r"(?i)\b(?:(?:when|whenever|if|once)\s+(?:i|we)|(?:when|while)\s+(?:[a-z]{{2,20}}-)?[a-z]{{2,20}}ing|{UNEXPLAINED})\b"
        ))
        .expect("static regex")
    })
    .replace_all(text, " ")
}

/// "For some reason" (or "whatever" or "an unknown" reason): the writer cannot explain what they
/// saw, which asks nothing. Shared by [`own_conditions`] and [`unexplained`].
const UNEXPLAINED: &str = r"for\s+(?:some|whatever|an?\s+unknown)\s+reasons?";

/// `text` without [`UNEXPLAINED`]'s words ("for some reason I receive NaNs for the loss").
fn unexplained(text: &str) -> std::borrow::Cow<'_, str> {
    static R: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    R.get_or_init(|| Regex::new(&format!(r"(?i)\b{UNEXPLAINED}\b")).expect("static regex"))
        .replace_all(text, " ")
}

/// The runs of `key=value` pairs on `line`, the way a trainer prints its metrics (k2/icefall's
/// "ctc_loss=0.1, att_loss=nan, loss=nan", Keras-style `loss=nan acc=0.5`): a value inside one,
/// quoted inside a sentence ("after 11,000 batches I got ctc_loss=0, att_loss=nan, loss=nan"), is
/// the log's output, not prose about a value. One pair alone stays a sentence's.
fn metric_runs_of(line: &str) -> Vec<std::ops::Range<usize>> {
    static RUN: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    if !line.contains('=') {
        return Vec::new();
    }
    super::prose::cached(
        &RUN,
        r"(?:\b[A-Za-z_][\w.]{0,30}=[^\s,;=]{1,30}(?:[,;]\s*|\s+)){1,}\b[A-Za-z_][\w.]{0,30}=[^\s,;=]{1,30}",
    )
    .find_iter(line)
    .map(|r| r.range())
    .collect()
}

/// The family of a key and its non-finite value (captures `key` and `tok`): a gradient norm's,
/// or a loss's by its value ([`loss_headline`]).
fn value_headline(c: &regex::Captures, either: bool) -> Option<Evidence> {
    let tok = c.name("tok")?.as_str();
    Some(if is_loss(c) {
        loss_headline(tok, either)
    } else {
        headline("nan_grad_norm", GRAD_HINT)
    })
}

/// Where the message that a log level tags ([`Patterns::level_tag`]) lies on `line`: from the
/// tag to the end of the line, or to the closing quote when a quotation opens with the tag.
fn level_message(line: &str) -> Option<std::ops::Range<usize>> {
    let m = patterns().level_tag.find(line)?;
    let close = match m.as_str().trim_start().chars().next() {
        Some('"') => Some('"'),
        Some('\'') => Some('\''),
        Some('\u{201c}') => Some('\u{201d}'),
        _ => None,
    };
    let start = m.end();
    let end = close
        .and_then(|q| line[start..].find(q))
        .map_or(line.len(), |i| start + i);
    Some(start..end)
}

/// Is `line` one key and the integer 0 and nothing else (`  "loss_scale": 0,`, `loss_scale: 0`),
/// as a configuration file writes the entry? A scaler's reading is a float (`loss_scale: 0.0`).
/// A launcher's or collector's prefix may come first, as where DeepSpeed prints its configuration
/// into a container's log: a CRI or ISO timestamp, torchrun's `[default0]:`, srun's `3: `,
/// Compose's `svc-1  | `. A diff's `+` or `-` may mark the line, as where a pull request changes
/// the configuration.
fn lone_entry(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    super::prose::cached(
        &R,
        r#"^(?:\d{4}-\d\d-\d\dT[\d:.]+Z?\s+(?:(?:stdout|stderr)\s+[FP]\s+)?|\[(?:default|rank)\d+\]:|\d{1,5}:\s|[\w.-]+\s+\|\s|[+-])?\s*["']?[A-Za-z_][\w.]*["']?\s*[:=]\s*0\s*,?\s*$"#,
    )
    .is_match(line)
}

/// A loss's family from its non-finite value: infinite only when the value is `inf` (in any
/// spelling) and the line does not say it may be NaN as well (`either`).
fn loss_headline(tok: &str, either: bool) -> Evidence {
    if tok.to_ascii_lowercase().contains("nan") || either {
        headline("non_finite_loss", LOSS_HINT)
    } else {
        headline("inf_loss", INF_HINT)
    }
}

/// Is the key a loss ([`KEY`]): it says so, or names a loss function rather than a norm or the
/// gradients?
fn is_loss(c: &regex::Captures) -> bool {
    c.name("key").is_some_and(|k| {
        let k = k.as_str().to_ascii_lowercase();
        k.contains("loss") || !(k.contains("norm") || k.starts_with("grad"))
    })
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

    /// Round twenty-nine: OpenMM's and Project Chrono's positions, and PyTorch's SVD of a
    /// non-finite matrix.
    #[test]
    fn round_twenty_nine_positions_and_matrices() {
        for (line, want) in [
            ("ValueError: Particle position is NaN", "simulation_unstable_nan"),
            ("ValueError: Particle position is infinite", "simulation_unstable_nan"),
            ("Error! particle position is NAN: thrown from ChFluidDynamics.cu, UpdateFluidDKernel !", "simulation_unstable_nan"),
            ("torch._C._LinAlgError: linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values.", "non_finite_value"),
        ] {
            assert_eq!(cat(line).as_deref(), Some(want), "{line}");
        }
        // An ill-conditioned matrix is not a non-finite one.
        assert_eq!(
            cat("linalg.svd: The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated singular values (error code: 5)."),
            None
        );
    }

    #[test]
    fn round_twenty_eight_padded_values_key_lists_and_nested_tensors() {
        for (line, want) in [
            // PaddleOCR's `{:x<6f}` padding.
            ("[2023/10/06 13:26:28] ppocr INFO: epoch: [1/500], global_step: 360, lr: 0.000093, acc: 0.000000, CTCLoss: nanxxx, SARLoss: nanxxx, loss: nanxxx, avg_reader_cost: 0.00016 s", "non_finite_loss"),
            ("[2021/06/03 00:17:35] root INFO: epoch: [1/600], iter: 10, lr: 0.000100, loss: -infxx, score_loss: 0.989663", "inf_loss"),
            // Several keys sharing the verb, a value that "equals" the token, and the run's own
            // activity before it.
            ("however after some epoches, the policy_loss, policy_entropy and approxkl all become nan.", "non_finite_loss"),
            ("When trying to teach mGPT through a notebook, after a while loss equals \"nan\".", "non_finite_loss"),
            // A model's output printed whole, narrower than a row.
            ("tensor([[[nan, nan, nan, nan, nan, nan, nan, nan, nan, nan],", "non_finite_value"),
        ] {
            assert_eq!(cat(line).as_deref(), Some(want), "{line}");
        }
        for line in [
            "When training with fp16, the loss may become nan.",
            "If the loss equals nan, stop.",
            "loss: 0.412xxx",
            ">>> torch.tensor([[nan, nan, nan]])",
        ] {
            assert_eq!(cat(line), None, "{line}");
        }
    }

    #[test]
    fn round_twenty_keys_glued_to_chinese_and_a_quoted_scaler() {
        // A Han character before the key is no word of it.
        assert_eq!(
            cat("微调Qwen2-7B-Instruct，用的bf16，训练一段时间后loss=nan，请问这个有什么方法解决吗？").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("训练一段时间后loss=0.53，请问"), None);
        assert_eq!(
            cat("DeepSpeed提示Loss scale already at minimum然后就自己中断训练了").as_deref(),
            Some("loss_scale_collapse")
        );
    }

    #[test]
    fn round_twenty_six_statistics_title_case_keys_messages_and_scalers() {
        for (line, want) in [
            ("2020-12-08 21:40:40.870695  | actor_loss/Median               nan", "non_finite_loss"),
            ("Steps : 40, Gen Loss Total :  nan, Mel-Spec. Error : 2.021, s/b : 0.443", "non_finite_loss"),
            ("ValueError:  [x] nan loss", "non_finite_loss"),
            ("RuntimeError: grad_scale is too small, exiting: 1.2924697071141057e-26", "loss_scale_collapse"),
            ("type = <class 'torch.Tensor'>, std = tensor([[nan, nan, nan,  ..., nan, nan, nan],", "non_finite_value"),
            ("loss tensor(nan, device='cuda:0', dtype=torch.float16, grad_fn=<MeanBackward0>)", "non_finite_loss"),
            ("[rank0] NaN gradient detected in Linear4bit's input gradient", "nan_grad_norm"),
            ("- NaN loss detected, skipping batch", "non_finite_loss"),
            ("[Bug] Finetune for InternVL2-8B loss =13.6234, grad = nan", "nan_grad_norm"),
        ] {
            assert_eq!(cat(line), Some(want.to_owned()), "{line}");
        }
        for line in [
            // Finite statistics, a sentence's capitalised words, a message that supposes.
            "2020-12-08 21:40:40.870695  | actor_loss/Median               0.125",
            "Steps : 40, Gen Loss Total :  12.5, Mel-Spec. Error : 2.021",
            "ValueError: if nan loss is seen, lower the learning rate",
            "loss tensor(0.4012, device='cuda:0')",
            "We print when a NaN gradient detected by the hook is found.",
            "loss =13.6234, grad = 0.51",
            // A summary with finite ends, and a small documentation tensor.
            "std = tensor([[nan, nan, 1.0,  ..., nan, nan, nan],",
            "tensor([nan, nan, nan])",
        ] {
            assert_eq!(cat(line), None, "{line}");
        }
    }

    #[test]
    fn round_twenty_five_costs_bars_tensors_and_reports() {
        for (line, want) in [
            ("[2020-09-05 20:22:42] Ep. 1 : Up. 300 : Sen. 137,255 : Cost nan : Time 17.18s : nan words/s : gNorm 41172.8250", "non_finite_loss"),
            ("Epoch: 0003 cost= nan", "non_finite_loss"),
            ("Valid Epoch: 16 Loss: nan: 100% 660/660 [00:04<00:00, 143.71it/s]", "non_finite_loss"),
            ("at FA3 dq is : tensor([nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan,", "non_finite_value"),
            ("Thanks for the code. I keep getting Nan loss at around 40 epochs.", "non_finite_loss"),
            ("the train loss always shows nan.", "non_finite_loss"),
            ("However, I run your code several times and always meet \"loss is nan\".", "non_finite_loss"),
            ("However, when I set \"distance_influence\" to \"none\", the loss becomes NaN in the back propagation of the first batch.", "non_finite_loss"),
            ("However, if I use it for clusters with different number of atoms, the losses become nan.", "non_finite_loss"),
        ] {
            assert_eq!(cat(line), Some(want.to_owned()), "{line}");
        }
        for line in [
            // A finite cost, and a small NaN tensor of a documentation example.
            "[2020-09-05 20:22:24] Ep. 1 : Up. 200 : Sen. 86,994 : Cost 211.39459229 : Time 20.37s",
            ">>> torch.full((4,), float('nan'))  # tensor([nan, nan, nan, nan])",
            "tensor([nan, nan, nan, nan, nan, nan, nan, nan])",
            // Advice and questions about meeting a NaN loss.
            "If you get nan loss, lower the learning rate.",
            "Why do I keep getting nan loss when I use fp16?",
            "If you set the learning rate too high, the loss becomes nan.",
            "why the loss becomes nan when I use fp16",
        ] {
            assert_eq!(cat(line), None, "{line}");
        }
    }

    #[test]
    fn round_twenty_four_trainer_checks_and_simulations() {
        for (line, want) in [
            ("FloatingPointError: gradients are Nan/Inf", "nan_grad_norm"),
            ("[2022-11-07 00:33:16,340][fairseq.nan_detector][WARNING] - Inf detected in output of , shape: torch.Size([1464, 505]), forward", "non_finite_value"),
            ("2021-03-01 10:00:00 | WARNING | fairseq.nan_detector | NaN detected in output of decoder.layers.3.self_attn, shape: torch.Size([8, 128, 512]), backward", "non_finite_value"),
            ("RuntimeError: normal expects all elements of std >= 0.0", "nan_output"),
            ("`RuntimeError: normal expects all elements of std >= 0.0`", "nan_output"),
            ("ValueError: Expected parameter loc (Tensor of shape (1, 2)) of distribution Normal(loc: torch.Size([1, 2]), scale: torch.Size([1, 2])) to satisfy the constraint Real(), but found inval", "nan_output"),
            ("WARNING: Nan, Inf or huge value in CTRL at ACTUATOR 0. The simulation is unstable. Time = 0.6000.", "simulation_unstable_nan"),
            ("WARNING: Nan, Inf or huge value in QACC at DOF 13. The simulation is unstable. Time = 0.2520.", "simulation_unstable_nan"),
            ("openmm.OpenMMException: Particle coordinate is NaN.  For more information, see https://github.com/openmm/openmm/wiki/Frequently-Asked-Questions#nan", "simulation_unstable_nan"),
            ("Exception: Particle coordinate is nan", "simulation_unstable_nan"),
        ] {
            assert_eq!(cat(line), Some(want.to_owned()), "{line}");
        }
        for line in [
            // Code that compares an exception's text with the message.
            "            if str(e) == 'Particle coordinate is nan':",
            // Sentences that tell what the messages mean.
            "The warning \"Nan, Inf or huge value in QACC\" typically indicates that the simulation is unstable.",
            "If you see `Particle coordinate is NaN`, the time step is usually too large.",
        ] {
            assert_eq!(cat(line), None, "{line}");
        }
    }

    #[test]
    fn round_twenty_three_particles_and_a_key_that_names_its_owner() {
        // Korean and Japanese particles attach to the key and to the value.
        assert_eq!(
            cat("epoch 2~3부터 중간에 loss = nan이 뜨다가 loss가 무한으로 발산하는데").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(
            cat("ds2 모델을 학습시키려하는데 loss가 nan이 발생합니다.").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(
            cat("学習中に loss = nanになる").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("loss가 0.53이 나옵니다"), None);
        assert_eq!(
            cat("grad_norm of qwen2 is 'nan'").as_deref(),
            Some("nan_grad_norm")
        );
        assert_eq!(cat("grad_norm of qwen2 is 0.5"), None);
        // The expression a script read the value with.
        assert_eq!(
            cat("train loss.item(): nan").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("train loss.item(): 0.25"), None);
    }

    #[test]
    fn round_twenty_outputs_exception_messages_and_reports_in_prose() {
        for line in [
            "NansException: A tensor with all NaNs was produced in Unet. This could be either because there's not enough precision",
            "modules.devices.NansException: A tensor with NaNs was produced in VAE.",
            "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",
        ] {
            assert_eq!(cat(line).as_deref(), Some("nan_output"), "{line}");
        }
        // An exception's message is the program's words.
        assert_eq!(
            cat("When using custom data for training: ValueError: loss is nan while training, is there any adjustment needed?").as_deref(),
            Some("non_finite_loss")
        );
        // A value someone says they met, unless the sentence is hypothetical or negated.
        assert_eq!(
            cat("However I am getting Loss nan, top1 98.00 for a train and val both").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(
            cat("If you are getting loss nan, lower the learning rate"),
            None
        );
        assert_eq!(cat("I never got loss nan with bf16"), None);
        // Caffe's spaced glog value, and a check of the gradients.
        assert_eq!(
            cat("I0712 12:18:40.334496  3123 solver.cpp:228] Iteration 100, loss = -nan")
                .as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(
            cat("InvalidArgumentError: Gradient for bert/embeddings/LayerNorm/gamma:0 is NaN : Tensor had NaN values").as_deref(),
            Some("nan_grad_norm")
        );
    }

    #[test]
    fn round_nineteen_loss_functions_and_lightning() {
        // A loss logged under its function's name (GluonCV's detection scripts).
        assert_eq!(
            cat("[Epoch 0][Batch 99], Speed: 31.855627 samples/sec, CrossEntropy=12.250115, SmoothL1=nan").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("val_mse: inf, epoch 3").as_deref(), Some("inf_loss"));
        assert_eq!(cat("CrossEntropy=12.250115, SmoothL1=0.51"), None);
        // A zero fraction after the value.
        assert_eq!(
            cat("val/loss=nan.0 when training with ddp").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("loss=nan.5 info"), None);
        // Lightning's check of the step's loss, old and new wording.
        assert_eq!(
            cat("ValueError: The loss returned in `training_step` is nan or inf.").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(
            cat("ValueError: The loss returned in `training_step` is tensor(nan, device='cuda:0', grad_fn=<AddBackward0>).").as_deref(),
            Some("non_finite_loss")
        );
    }

    #[test]
    fn logger_tables_and_messages_in_code_spans() {
        // OpenAI baselines' key/value table (improved-diffusion, stable-baselines3).
        assert_eq!(
            cat("| loss          | nan       |").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(
            cat("|    grad_norm       | inf      |").as_deref(),
            Some("nan_grad_norm")
        );
        assert_eq!(
            cat("[default0]:| loss          | nan       |").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("| loss          | 0.0123    |"), None);
        assert_eq!(cat("| loss | nan | not a number |"), None);
        assert_eq!(cat("| loss | nan | the loss went nan |"), None);
        // A table's cell describes; it does not report a run ("| Symptom | Cause |").
        assert_eq!(cat("| the loss went nan | learning rate too high |"), None);
        // A trainer's message quoted in a code span keeps its level tag.
        assert_eq!(
            cat("`WARNING: The grad norm is nan. Skipping updating the model.`").as_deref(),
            Some("nan_grad_norm")
        );
    }

    #[test]
    fn metric_runs_quoted_in_a_sentence() {
        // A trainer's run of metrics, quoted in a report, is the log's output.
        assert_eq!(
            cat(
                "But after about 11,000 batches, I got ctc_loss=0, att_loss=nan, loss=nan problem."
            )
            .as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(
            cat("when training I see loss=nan acc=0.51 on every step").as_deref(),
            Some("non_finite_loss")
        );
        // One pair in a sentence is prose about a value, unless someone says they met it.
        assert_eq!(
            cat("I got loss=nan after 100 steps").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("If you see loss=nan, lower the learning rate."), None);
    }

    #[test]
    fn round_fourteen_messages_behind_a_level() {
        // A trainer's own message behind a log level is output, sentence words and all.
        for (line, want) in [
            ("2023-04-01 12:00:00 WARNING: Skip the batch due to the loss is NaN, it may be caused by exceeding the precision or invalid labels", "non_finite_loss"),
            ("Conformer-Transducer: WARNING: loss (=nan) is not correct", "non_finite_loss"),
            // Quoted in a report's sentence, with the value before its key.
            ("and get nan loss after \"WARNING: received a nan loss, setting loss value to 0\", how do i keep training?", "non_finite_loss"),
            ("[ERROR] received an inf loss, skipping", "inf_loss"),
            // "Warning:" opening a quotation.
            ("the log says \"Warning: the loss is nan, skipping batch\" and moves on", "non_finite_loss"),
            ("WARNING: grad norm is nan. Do not update model.", "nan_grad_norm"),
            // Markdown emphasis around a value; a Han character right after one.
            ("GLOBAL STEP : 29003 / LEARNING RATE : 0.001 / **LOSS : nan** ( 1.93 secs)", "non_finite_loss"),
            ("第3轮 loss: nan的时候", "non_finite_loss"),
        ] {
            assert_eq!(cat(line).as_deref(), Some(want), "{line}");
        }
        for line in [
            // The statement that prints such a message is code.
            "    print(\"WARNING: received a nan loss, setting loss value to 0\")",
            // No level tag: a sentence about a nan loss stays prose.
            "If you received a nan loss, the learning rate is too high.",
            "the warning says the loss is NaN sometimes",
            // A lower-case "warning:" inside a sentence is not a tag.
            "a warning: if the loss is nan, lower the lr",
            // A tagged message that is hypothetical, negated or about a check or an option.
            "WARNING: if the loss is nan, lower the learning rate",
            "WARNING: no nan loss detected in the last 1000 steps",
            "WARNING: NaN loss detection is enabled; training will stop on the first NaN loss",
            "2024-01-01 WARNING: skipped 0 batches with nan loss this epoch",
            "[ERROR] Set --skip-nan to ignore batches where the loss is nan",
            // `nan` inside a word is no value.
            "WARNING: nanoGPT loss reached 2.9",
        ] {
            assert_eq!(cat(line), None, "{line}");
        }
    }

    #[test]
    fn round_thirteen_value_forms() {
        // PaddleDetection prints its losses as a dict of strings.
        assert_eq!(
            cat("2020-09-22 05:48:01,435-INFO: iter: 760, lr: 0.000500, 'loss_xy': 'nan', 'loss': 'nan', time: 32.612, eta: 3:59:09").as_deref(),
            Some("non_finite_loss")
        );
        // A dict's quoted key inside a sentence.
        assert_eq!(
            cat("[Bug] Im getting 'grad_norm': nan, 'learning_rate': 0.0 during GRPO").as_deref(),
            Some("nan_grad_norm")
        );
        // A Chinese adverb before the copula.
        assert_eq!(
            cat("按照examples中的脚本微调llama2，grad_norm总是nan，loss=0").as_deref(),
            Some("nan_grad_norm")
        );
        // check_numerics on a loss: either of the two.
        assert_eq!(
            cat("E tensorflow/core/kernels/check_numerics_op.cc:157] abnormal_detected_host @0x208a7b900 = {1, 0} Loss is inf or nan").as_deref(),
            Some("non_finite_loss")
        );
        // YOLO trainers' progress rows: epoch/epochs, memory, loss columns.
        assert_eq!(
            cat("     6/149     13.5G       nan       nan       nan       nan         3       640         0         0").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(
            cat("      6/100      3.95G        inf      1.234      1.111         16        640: 100%").as_deref(),
            Some("inf_loss")
        );
        for prefixed in [
            "2024-05-01T12:00:00.123456789Z      6/149     13.5G       nan       nan       nan",
            "trainer-1  |      6/149     13.5G       nan       nan       nan",
            "[default0]:     6/149     13.5G       nan       nan       nan",
        ] {
            assert_eq!(
                cat(prefixed).as_deref(),
                Some("non_finite_loss"),
                "{prefixed}"
            );
        }
        // Not a row: a ratio and a size in a sentence, a memory reading without loss columns.
        assert_eq!(
            cat("copied 3/10 files, 1.5G total, nan errors").as_deref(),
            None
        );
        assert_eq!(
            cat("GPU 1/4 79.6G nan memory reading unavailable").as_deref(),
            None
        );
        // A finite row, and a nan past the loss columns (a metric), are not.
        assert_eq!(
            cat("     5/149     13.5G   0.04284  0.004414  0.009558   0.05681        12       640"),
            None
        );
        assert_eq!(
            cat("     5/149     13.5G   0.04   0.004   0.009   0.05   12   640   nan"),
            None
        );
        // A quotation that holds more than the key is prose as before.
        assert_eq!(cat("if the loss is nan, lower the learning rate"), None);
        assert_eq!(
            cat("If the \"loss is nan\" warning appears, lower the lr"),
            None
        );
        assert_eq!(
            cat("Search the issues for \"loss nan\" before you open one"),
            None
        );
        // A key and its value quoted together in a sentence.
        assert_eq!(
            cat("When training to epoch [30/100], \"loss:inf\" appears.").as_deref(),
            Some("inf_loss")
        );
        assert_eq!(
            cat("When the \"loss: nan is common\" note shows, ignore it"),
            None
        );
        // A YOLO row's value in capitals.
        assert_eq!(
            cat("     6/149     13.5G       INF       nan       nan").as_deref(),
            Some("inf_loss")
        );
    }

    #[test]
    fn round_ten_value_forms() {
        // fairseq's progress line names the gradient norm `gnorm` (fairseq/trainer.py).
        assert_eq!(
            cat("| epoch 003 | loss 9.871 | ppl 936.2 | wps 20311 | lr 0.0005 | gnorm inf | clip 1.000").as_deref(),
            Some("nan_grad_norm")
        );
        assert_eq!(
            cat("| epoch 001  2000 / 90000 loss=6.12 (7.02), lr=0.25, clip=100%, gnorm=inf")
                .as_deref(),
            Some("nan_grad_norm")
        );
        // A metric logger's "current (average)" without a colon.
        assert_eq!(
            cat("[2024-05-02 11:02:13 vit_base](train.py 301): INFO Train: [3/300][120/5004]  loss 2.9911 (3.1002)  grad_norm 0.8714 (nan)  mem 9120MB").as_deref(),
            Some("nan_grad_norm")
        );
        // A finite norm next to the name of the key is not a value.
        assert_eq!(cat("gnorm_clip nan_checks enabled"), None);
        // Commit subjects and pull-request titles about a value.
        assert_eq!(
            cat("Adding comment to ignore loss=nan on the first step"),
            None
        );
        assert_eq!(
            cat("Fix grad_norm=inf when resuming from a bf16 checkpoint"),
            None
        );
    }

    #[test]
    fn bracketed_and_capitalised_keys() {
        // loguru table of https://github.com/nv-tlabs/LION (trainers/base_trainer.py's format).
        assert_eq!(
            cat("2023-01-25 00:21:34.569 | INFO     | trainers.base_trainer:train_epochs:256 - [R0] | E6 iter[ 14/ 15] | [Loss] nan | [step]   104 |").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(
            cat("Epoch 3 Train Loss nan").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("[grad_norm]: inf").as_deref(), Some("nan_grad_norm"));
        assert_eq!(cat("| [Loss] 0.4211 | [step] 104 |"), None);
    }

    #[test]
    fn padded_keys_copulas_code_spans_and_caffe_debug_info() {
        // A fixed-width table pads the key before its colon.
        assert_eq!(cat("LOSS     :  nan").as_deref(), Some("non_finite_loss"));
        assert_eq!(cat("Epoch    :  8"), None);
        // Chinese reports join key and value with a copula.
        assert_eq!(
            cat("训练到第3个epoch时 loss为 nan").as_deref(),
            Some("non_finite_loss")
        );
        assert_eq!(cat("grad_norm为 nan").as_deref(), Some("nan_grad_norm"));
        assert_eq!(
            cat("检测到 loss为 nan，跳过该batch").as_deref(),
            Some("non_finite_loss")
        );
        // A value quoted as code in a sentence that says someone met it.
        assert_eq!(
            cat("I encountered `loss=inf` at 3rd epoch (1 and 2 ran without any issue).")
                .as_deref(),
            Some("inf_loss")
        );
        assert_eq!(
            cat("If the loss becomes `loss=nan`, lower the learning rate."),
            None
        );
        // Caffe's debug_info (src/caffe/net.cpp).
        assert_eq!(
            cat("I0315 11:08:25.781900 11950 net.cpp:630]     [Backward] Layer relu3_3, param blob 0 diff: nan").as_deref(),
            Some("nan_in_backward")
        );
        assert_eq!(
            cat("I0315 11:08:25.781900 11950 net.cpp:591]     [Forward] Layer fc8, top blob fc8 data: inf").as_deref(),
            Some("non_finite_value")
        );
        assert_eq!(
            cat("I0315 11:08:25.781900 11950 net.cpp:642]     [Update] Layer conv1, param 0 data: 0.0123; diff: nan").as_deref(),
            Some("non_finite_parameters")
        );
        assert_eq!(
            cat("I0315 11:08:25.784045 11950 net.cpp:619]     [Backward] Layer conv3_3, bottom blob conv3_2 diff: 0.00012"),
            None
        );
    }

    #[test]
    fn scale_printed_as_a_metric() {
        // fairseq's progress line (facebookresearch/fairseq, issue 515's wording).
        assert_eq!(
            cat("| epoch 001:    200 / 1374 loss=14.351, ppl=20899.56, num_updates=190, gnorm=3.901, oom=0.000, loss_scale=0.062, wall=1061").as_deref(),
            Some("loss_scale_collapse")
        );
        assert_eq!(
            cat("| epoch 001:    200 / 1374 loss=4.351, loss_scale=1.000, wall=1061"),
            None
        );
        assert_eq!(cat("{'loss': 0.41, 'loss_scale': 65536.0}"), None);
        // fairseq's simple format separates key and value with a space (`| loss_scale 0.000 |`).
        assert_eq!(
            cat("| epoch 028 | loss 3.976 | nll_loss 2.204 | ppl 4.61 | gnorm 0.635 | clip 0.000 | oom 0.000 | loss_scale 0.000 | wall 4043").as_deref(),
            Some("loss_scale_collapse")
        );
        assert_eq!(
            cat("| epoch 003 | loss 6.1 | loss_scale 128.000 | wall 40"),
            None
        );
    }

    #[test]
    fn runtime_non_finite_messages_and_not_sentences_about_them() {
        for (line, want) in [
            // Ultralytics YOLOv5 train.py; PyTorch torch/nn/utils/clip_grad.py (two releases).
            ("WARNING: non-finite loss, ending training  tensor([nan, nan, 0., nan], device='cuda:0')", "non_finite_loss"),
            ("train.py:317: FutureWarning: Non-finite norm encountered in torch.nn.utils.clip_grad_norm_; continuing anyway.", "nan_grad_norm"),
            ("RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`", "nan_grad_norm"),
            // Autograd's anomaly mode (torch/csrc/autograd/engine.cpp).
            ("RuntimeError: Function 'MulBackward0' returned nan values in its 0th output.", "nan_in_backward"),
            // TensorFlow's and Megatron-LM's own checks.
            ("tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: NaN loss during training.", "non_finite_loss"),
            ("InvalidArgumentError: LossTensor is inf or nan : Tensor had NaN values", "non_finite_loss"),
            ("RuntimeError: Rank 3: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: 3, node: node-7", "nan_grad_norm"),
            ("AssertionError: Rank 0: found NaN in local forward loss calculation. Device: 0, node: node-1", "non_finite_loss"),
        ] {
            assert_eq!(cat(line).as_deref(), Some(want), "{line}");
        }
        assert_eq!(
            cat("This warning is raised by PyTorch when it encounters non-finite gradient values during gradient clipping with torch.nn.utils.clip_grad_norm_."),
            None
        );
        // check_numerics on a tensor that is not a loss says nothing about the loss.
        assert_eq!(
            cat("InvalidArgumentError: activations : Tensor had NaN values"),
            None
        );
    }

    #[test]
    fn statistics_tuples_and_prefixed_norm_keys() {
        assert_eq!(
            cat("validation loss (min, avg, max): (inf, nan, -inf)").as_deref(),
            Some("inf_loss")
        );
        assert_eq!(
            cat("\"train_grad_norm\": NaN").as_deref(),
            Some("nan_grad_norm")
        );
        assert_eq!(
            cat("validation loss (min, avg, max): (0.1, 0.2, 0.3)"),
            None
        );
    }

    #[test]
    fn scale_changes_in_each_trainers_wording() {
        // fairseq's fp16 trainer (facebookresearch/fairseq issue 512).
        assert_eq!(
            cat("| WARNING: overflow detected, setting loss scale to: 0.25").as_deref(),
            Some("loss_scale_collapse")
        );
        assert_eq!(
            cat("| WARNING: overflow detected, setting loss scale to: 64.0"),
            None
        );
        assert_eq!(
            cat("Overflow detected, decreasing loss_scale to 0.5").as_deref(),
            Some("loss_scale_collapse")
        );
        // A scale printed as a metric is no change, whatever its value (bf16 runs print 1.0).
        assert_eq!(
            cat(" iteration 100/ 500 | lm loss: 7.4E+00 | loss scale: 1.0 | grad norm: 1.2 |"),
            None
        );
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
    fn log_shaped_values() {
        for (line, want) in [
            // Hugging Face Trainer metrics dict (transformers trainer.py `log`), e.g.
            // https://github.com/huggingface/transformers/issues/14446
            ("{'loss': nan, 'learning_rate': 4.9e-05, 'epoch': 0.02}", "non_finite_loss"),
            ("{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.5}", "nan_grad_norm"),
            // PyTorch Lightning progress bar (tqdm postfix), e.g.
            // https://github.com/Lightning-AI/pytorch-lightning/issues/4956
            ("Epoch 0:  12%|#2        | 60/500 [00:05<00:40, 10.9it/s, loss=nan, v_num=3]", "non_finite_loss"),
            // Keras progress line.
            ("1875/1875 [==============================] - 5s 3ms/step - loss: nan - accuracy: 0.0987", "non_finite_loss"),
            // Megatron-LM training log ("{key}: {value:.6E} |" prints NAN).
            (" iteration      200/  500000 | lm loss: NAN | loss scale: 1.0 |", "non_finite_loss"),
            (" iteration      200/  500000 | lm loss: 7.1E+00 | grad norm: nan |", "nan_grad_norm"),
            ("step 5 loss nan lr 1e-4", "non_finite_loss"),
            ("train_loss=inf val_loss=2.3", "inf_loss"),
            // The JVM's and JavaScript's spellings of non-finite doubles, and C's `%F`.
            ("2024-01-01 10:00:00 INFO  DistriOptimizer$:429 - [Epoch 1 0/60000][Iteration 1] Trained 128 records. Loss is NaN. Sequential throughput is 12.3 record / second.", "non_finite_loss"),
            ("[Iteration 300] Loss is Infinity", "inf_loss"),
            ("iter 120 loss NAN lr 0.001", "non_finite_loss"),
            ("loss: tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)", "non_finite_loss"),
            ("{\"loss\": \"nan\", \"ppl\": \"nan\"}", "non_finite_loss"),
            // DETR / torchvision references: `print("Loss is {}, stopping training")`.
            ("Loss is nan, stopping training", "non_finite_loss"),
            // "current (average)" metric loggers (torchvision references' SmoothedValue), also
            // inside Markdown emphasis.
            ("Epoch: [3]  [ 120/1251]  eta: 0:10:01  lr: 0.000100  loss: 4.1021 (nan)  time: 0.4711", "non_finite_loss"),
            ("**grad_norm: 0.3922 (nan)**", "nan_grad_norm"),
            ("loss: nan (6.9012)", "non_finite_loss"),
            // Static-graph trainers' fetched values (PaddlePaddle, TensorFlow 1.x sessions).
            ("2023-03-01 10:00:00,000-INFO: epoch: 2, batch: 40, loss: [nan], acc: [0.1]", "non_finite_loss"),
            ("step 400, loss = [ inf]", "inf_loss"),
            ("step 400 loss: [nan 0.31]", "non_finite_loss"),
            // A group of loss components (older YOLO trainers' `[Losses: x %f, …, total %f]`).
            ("[Epoch 0/100, Batch 17/1000] [Losses: x 0.201, y 0.198, w nan, h nan, conf nan, cls nan, total nan, recall: 0.00000, precision: 0.00000]", "non_finite_loss"),
            ("Losses: {'loss_classifier': 0.51, 'loss_box_reg': inf}", "inf_loss"),
            // mmengine prints the gradient norm first; the loss decides the family.
            ("Epoch(train)  [1][  50/1000]  lr: 2.0e-03  eta: 1:02:03  time: 0.51  data_time: 0.01  memory: 9000  grad_norm: nan  loss: nan  loss_cls: nan", "non_finite_loss"),
            // fairseq dynamic loss scaler.
            ("FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the learning rate", "loss_scale_collapse"),
        ] {
            assert_eq!(cat(line).as_deref(), Some(want), "{line}");
        }
    }

    #[test]
    fn prose_about_nan_is_not_an_event() {
        for line in [
            "If the loss becomes NaN, lower the learning rate.",
            "if the loss is nan, skip the batch",
            "Registers a hook that raises when the loss is NaN or inf.",
            "check whether loss is nan before calling backward()",
            "loss=0.2345 nan_count=0",
            "loss: 0.51 info: saving",
            "grad_norm: 0.93 (inf-norm 1.2)",
            "the loss function handles nan inputs",
            "With mixed precision the grad norm is nan for the first steps, which is expected.",
            "grad_norm nan is caused by the fp16 overflow in the first steps",
            "loss inf means the learning rate is too high",
        ] {
            assert_eq!(cat(line), None, "{line}");
        }
        // Someone saying they met the value reports it (round twenty).
        for line in [
            "I get grad_norm: nan after a few hundred steps with fp16",
            "we always see loss = nan (0.0) in the first epoch",
        ] {
            assert!(cat(line).is_some(), "{line}");
        }
    }

    #[test]
    fn what_became_of_a_value_in_a_run_is_a_report() {
        for (line, want) in [
            ("I faced a problem while training: after several training iterations, the training loss became NaN.", "non_finite_loss"),
            ("the log shows that grad_norm keeps being nan, do you know why this happens", "nan_grad_norm"),
            ("training_loss becomes 'nan' sometimes after several epochs.", "non_finite_loss"),
            ("However, the loss is **always NaN**.", "non_finite_loss"),
            ("I found that the actor grad norms were always NaN.", "nan_grad_norm"),
            ("After a few steps the loss suddenly jumps to inf", "inf_loss"),
        ] {
            assert_eq!(cat(line).as_deref(), Some(want), "{line}");
        }
        // A gradient-boosting library's metric by its short name.
        assert_eq!(
            cat("[8]\teval-mae:inf\ttrain-mae:inf").as_deref(),
            Some("inf_loss")
        );
        assert_eq!(
            cat("[12]\tvalidation_0-rmse:nan").as_deref(),
            Some("non_finite_loss")
        );
        // A supposition, a question or advice tells of no run.
        for line in [
            "If the loss becomes nan, skip the step",
            "Why loss become nan while training",
            "In cases where loss goes to nan (e.g., bad nodes or bad hparams), we would like to raise an exception",
            "There are various reasons why loss might become nan.",
            "the loss should never become nan with bf16",
            "* Stop training after train or validation loss is NaN, prints NaNs in inputs and outputs to debug.",
        ] {
            assert_eq!(cat(line), None, "{line}");
        }
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
