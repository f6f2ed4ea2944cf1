//! The report's HTML pages: self-contained (inline CSS, no script, no network), images referenced by
//! relative paths beside the page, laid out for 1280 px wide screens and for phones (the method
//! cards wrap into one column).

use std::fmt::Write as _;

use super::pair_report::{Availability, PairReport};
use super::query_report::{QueryReport, Ranking};

/// `text` with the five HTML-special characters escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The shared style: a responsive grid of cards, images never wider than their card.
const STYLE: &str = r#"
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:16px;color:#1a1a1a;background:#f6f7f9;line-height:1.4}
main{max-width:1248px;margin:0 auto}
h1{font-size:1.5rem;margin:0 0 8px}
h2{font-size:1.15rem;margin:0 0 8px}
h3{font-size:1rem;margin:12px 0 4px}
.meta{color:#555;font-size:.85rem;overflow-wrap:anywhere}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,380px),1fr));gap:16px;margin-top:16px}
.card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:12px;min-width:0}
.card img{max-width:100%;height:auto;display:block}
.na{background:#fff4f4;border:2px dashed #c44;color:#822;padding:16px;border-radius:8px;font-weight:600}
.inputs{display:flex;gap:16px;flex-wrap:wrap}
.inputs figure{margin:0}
.px{image-rendering:pixelated;width:128px;height:auto}
table{border-collapse:collapse;font-size:.85rem;width:100%}
td,th{border-bottom:1px solid #e4e7eb;padding:3px 6px;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.legend{display:flex;align-items:center;gap:8px;font-size:.8rem;color:#444;margin:6px 0}
.jet{flex:0 0 160px;height:12px;border:1px solid #333;background:linear-gradient(to right,#00007f,#0000ff,#007fff,#00ffff,#7fff7f,#ffff00,#ff7f00,#ff0000,#7f0000)}
.hits{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,280px),1fr));gap:12px}
.hit{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:8px;min-width:0}
.hit.ok{border-left:6px solid #2a8a3a}.hit.bad{border-left:6px solid #c43}.hit.unknown{border-left:6px solid #999}
.thumbs{display:flex;gap:4px;flex-wrap:wrap;margin-top:6px}
.thumbs a{flex:1 1 70px;min-width:0}
.thumbs img{width:100%;height:auto;display:block;border:1px solid #ccc}
.tag{font-weight:700}.tag.ok{color:#1f7a30}.tag.bad{color:#b3261e}
.scroll{overflow-x:auto}
a{color:#0b57d0}
"#;

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n{body}</main>\n</body>\n</html>\n",
        escape(title)
    )
}

/// The legend of a heat map: the colour scale and what its ends mean.
fn legend(low: &str, high: &str) -> String {
    format!(
        "<div class=\"legend\"><span>{}</span><span class=\"jet\" role=\"img\" aria-label=\"colour scale\"></span><span>{}</span></div>",
        escape(low),
        escape(high)
    )
}

fn figure(src: &str, alt: &str) -> String {
    format!("<img src=\"{}\" alt=\"{}\">", escape(src), escape(alt))
}

fn not_available(reason: &str) -> String {
    format!("<div class=\"na\">not available: {}</div>", escape(reason))
}

/// The pair view. `back` links to the page that opened it (a query report), if any.
pub fn pair_page(report: &PairReport, run: &str, back: Option<&str>) -> String {
    let mut b = String::new();
    pair_inputs(&mut b, report, run, back);
    pair_similarities(&mut b, report);
    let _ = writeln!(b, "<div class=\"cards\">");
    diml_section(&mut b, report);
    attention_section(&mut b, report);
    avsl_section(&mut b, report);
    saliency_section(&mut b, report);
    let _ = writeln!(b, "</div>");
    page("Pair explanation", &b)
}

/// The pair view's heading, the run and checkpoint, and the two inputs.
fn pair_inputs(b: &mut String, report: &PairReport, run: &str, back: Option<&str>) {
    if let Some(back) = back {
        let _ = writeln!(b, "<p><a href=\"{}\">&larr; back to the query</a></p>", escape(back));
    }
    let _ = writeln!(b, "<h1>Why are these two images (dis)similar?</h1>");
    let _ = writeln!(
        b,
        "<p class=\"meta\">run {} &middot; checkpoint {} &middot; input {}&times;{} px</p>",
        escape(run),
        escape(&report.checkpoint.display().to_string()),
        report.input_size[0],
        report.input_size[1]
    );
    let _ = writeln!(b, "<div class=\"inputs\">");
    for (i, (file, path)) in report.files.images.iter().zip(&report.images).enumerate() {
        let _ = writeln!(
            b,
            "<figure><img class=\"px\" src=\"{}\" alt=\"image {n}\"><figcaption class=\"meta\">image {n}: {}</figcaption></figure>",
            escape(file),
            escape(&path.display().to_string()),
            n = i + 1,
        );
    }
    let _ = writeln!(b, "</div>");
}

/// The table of every method's similarity or distance of the pair.
fn pair_similarities(b: &mut String, report: &PairReport) {
    let g = &report.global;
    let d = &report.diml;
    let avsl_cell = match &report.avsl {
        Availability::Available(a) => format!("{:.4}", a.d_hat),
        Availability::NotAvailable { .. } => "not available".into(),
    };
    let _ = writeln!(
        b,
        "<div class=\"card\" style=\"margin-top:16px\"><h2>Similarities</h2><div class=\"scroll\"><table>\
         <tr><th>measure</th><th class=\"n\">value</th><th>meaning</th></tr>\
         <tr><td>global cosine</td><td class=\"n\">{:.4}</td><td>cos of the two embeddings</td></tr>\
         <tr><td>retrieval distance ({})</td><td class=\"n\">{:.4}</td><td>what plain retrieval ranks by (smaller is closer)</td></tr>\
         <tr><td>DIML structural similarity</td><td class=\"n\">{:.4}</td><td>&Sigma; T*&middot;S over the {}&times;{} grids (Eq. 5)</td></tr>\
         <tr><td>DIML re-ranking similarity</td><td class=\"n\">{:.4}</td><td>global cosine + structural (larger is closer)</td></tr>\
         <tr><td>AVSL overall distance d&#770;</td><td class=\"n\">{}</td><td>Eq. 9 (smaller is closer)</td></tr>\
         <tr><td>attention scores s&sup1;, s&sup2;</td><td class=\"n\">{:.4}, {:.4}</td><td>w&#7488;f of each image</td></tr>\
         </table></div></div>",
        g.cosine,
        escape(&g.retrieval_distance),
        g.distance,
        d.structural_similarity,
        d.grid,
        d.grid,
        d.rerank_similarity,
        avsl_cell,
        report.attention.scores[0],
        report.attention.scores[1],
    );
}

/// DIML's marginals, top flows and their table.
fn diml_section(b: &mut String, report: &PairReport) {
    let d = &report.diml;
    let _ = writeln!(
        b,
        "<section class=\"card\" id=\"diml\"><h2>DIML: transport between locations</h2>\
         <h3>Marginals &mu; (how much mass each location sends or receives)</h3>{}{}\
         <h3>Top {} flows (line colour and width: contribution T*<sub>ij</sub>S<sub>ij</sub>)</h3>{}{}",
        figure(&report.files.marginals, "DIML marginals of both images"),
        legend("low mass", "high mass"),
        d.top_flows.len(),
        figure(&report.files.flows, "DIML top flows between the images"),
        legend("smaller contribution", "larger contribution"),
    );
    let _ = writeln!(
        b,
        "<div class=\"scroll\"><table><tr><th>from cell</th><th>to cell</th><th class=\"n\">T*</th><th class=\"n\">S</th><th class=\"n\">T*&middot;S</th></tr>"
    );
    for f in &d.top_flows {
        let _ = writeln!(
            b,
            "<tr><td>({}, {})</td><td>({}, {})</td><td class=\"n\">{:.4}</td><td class=\"n\">{:.4}</td><td class=\"n\">{:.4}</td></tr>",
            f.source_cell[0],
            f.source_cell[1],
            f.target_cell[0],
            f.target_cell[1],
            f.plan,
            f.similarity,
            f.contribution
        );
    }
    let _ = writeln!(
        b,
        "</table></div><p class=\"meta\">Sinkhorn: {} iterations, marginal error {:.2e}</p></section>",
        d.convergence.iterations, d.convergence.marginal_error
    );
}

/// Similarity attention of both images.
fn attention_section(b: &mut String, report: &PairReport) {
    let a = &report.attention;
    let _ = writeln!(
        b,
        "<section class=\"card\" id=\"attention\"><h2>Similarity attention</h2>{}{}\
         <p class=\"meta\">Grad-CAM of the pair's score at {} ({}&times;{}), both maps on one scale.</p></section>",
        figure(&report.files.attention, "similarity attention of both images"),
        legend("no attention", "most attention"),
        escape(&a.stage),
        a.map_shape[0],
        a.map_shape[1]
    );
}

/// AVSL's node CAMs per level, or why the run has none.
fn avsl_section(b: &mut String, report: &PairReport) {
    let _ = writeln!(
        b,
        "<section class=\"card\" id=\"avsl\"><h2>AVSL: attributed similarity nodes</h2>"
    );
    match &report.avsl {
        Availability::Available(r) => {
            let _ = writeln!(
                b,
                "<p>d&#770; = {:.4} (&Sigma; &lambda;&delta; = {:.4})</p>",
                r.d_hat, r.recomposed
            );
            for (level, file) in r.levels.iter().zip(&report.files.avsl) {
                let _ = writeln!(
                    b,
                    "<h3>{}: distance {:.4}</h3>{}",
                    escape(&level.stage),
                    level.distance,
                    figure(file, &format!("AVSL node CAMs at {}", level.stage))
                );
                let _ = writeln!(
                    b,
                    "<div class=\"scroll\"><table><tr><th>node</th><th class=\"n\">&lambda;</th><th class=\"n\">&delta;</th><th class=\"n\">&lambda;&delta;</th></tr>"
                );
                for n in &level.top_nodes {
                    let _ = writeln!(
                        b,
                        "<tr><td>#{}</td><td class=\"n\">{:.4}</td><td class=\"n\">{:.4}</td><td class=\"n\">{:.4}</td></tr>",
                        n.node, n.attribution, n.delta, n.contribution
                    );
                }
                let _ = writeln!(b, "</table></div>");
            }
            let _ = writeln!(b, "{}", legend("low activation", "high activation"));
        }
        Availability::NotAvailable { reason } => {
            let _ = writeln!(b, "{}", not_available(reason));
        }
    }
    let _ = writeln!(b, "</section>");
}

/// SmoothGrad saliency of both images.
fn saliency_section(b: &mut String, report: &PairReport) {
    let s = &report.saliency;
    let _ = writeln!(
        b,
        "<section class=\"card\" id=\"saliency\"><h2>SmoothGrad saliency</h2>{}{}\
         <p class=\"meta\">{} noisy samples (spread {}), each map divided by its 99th percentile ({:.3e}, {:.3e}) and clipped to [0, 1].</p></section>",
        figure(&report.files.saliency, "SmoothGrad saliency of both images"),
        legend("0 (not salient)", "1 (99th percentile)"),
        s.samples,
        s.spread,
        s.p99[0],
        s.p99[1]
    );
}

/// The query view: the query, then one list of hits per ranking method.
pub fn query_page(report: &QueryReport) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "<h1>What does the model retrieve for this query, and why?</h1>");
    let _ = writeln!(
        b,
        "<p class=\"meta\">run {} &middot; checkpoint {} &middot; split {} of {} ({} images)</p>",
        escape(&report.run),
        escape(&report.checkpoint.display().to_string()),
        escape(&report.split),
        escape(&report.dataset),
        report.gallery_size
    );
    let label = match (&report.query_label, &report.query_class) {
        (Some(l), Some(c)) => format!("label {l} ({})", escape(c)),
        _ => "label unknown (the file is not in the dataset's manifest)".into(),
    };
    let _ = writeln!(
        b,
        "<div class=\"inputs\"><figure><img class=\"px\" src=\"{}\" alt=\"query\"><figcaption class=\"meta\">query: {}<br>{}</figcaption></figure></div>",
        escape(&report.query_image),
        escape(&report.query.display().to_string()),
        label
    );
    let _ = writeln!(
        b,
        "<p class=\"meta\">Each hit shows its explanations with the query (attention, DIML flows, saliency, AVSL's top level where available); click one to open the pair view.</p>"
    );
    for ranking in &report.rankings {
        ranking_section(&mut b, ranking);
    }
    page("Query explanation", &b)
}

fn ranking_section(b: &mut String, ranking: &Ranking) {
    let _ = writeln!(
        b,
        "<section class=\"card\" style=\"margin-top:16px\"><h2>{}</h2><p class=\"meta\">score: {}</p>",
        escape(&ranking.title),
        escape(&ranking.score)
    );
    match &ranking.hits {
        Availability::NotAvailable { reason } => {
            let _ = writeln!(b, "{}", not_available(reason));
        }
        Availability::Available(list) => {
            let _ = writeln!(b, "<div class=\"hits\">");
            for hit in &list.hits {
                let (class, tag) = match hit.correct {
                    Some(true) => ("ok", "<span class=\"tag ok\">&#10003; correct</span>"),
                    Some(false) => ("bad", "<span class=\"tag bad\">&#10007; incorrect</span>"),
                    None => ("unknown", "<span class=\"tag\">?</span>"),
                };
                let _ = writeln!(
                    b,
                    "<div class=\"hit {class}\"><div style=\"display:flex;gap:8px;align-items:center\">\
                     <a href=\"{}\"><img class=\"px\" style=\"width:64px\" src=\"{}\" alt=\"hit {}\"></a>\
                     <div><b>#{}</b> {}<br>label {} ({})<br>score {:.4}</div></div><div class=\"thumbs\">",
                    escape(&hit.pair_page),
                    escape(&hit.image),
                    hit.rank,
                    hit.rank,
                    tag,
                    hit.label,
                    escape(&hit.class_name),
                    hit.score
                );
                for (name, src) in &hit.thumbnails {
                    let _ = writeln!(
                        b,
                        "<a href=\"{}\" title=\"{}\">{}</a>",
                        escape(&hit.pair_page),
                        escape(name),
                        figure(src, name)
                    );
                }
                let _ = writeln!(b, "</div></div>");
            }
            let _ = writeln!(b, "</div>");
        }
    }
    let _ = writeln!(b, "</section>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_characters_are_escaped() {
        assert_eq!(escape(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
