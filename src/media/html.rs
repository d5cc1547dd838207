//! A web page as readable Markdown for the `web_fetch` tool: the page's main element when it
//! marks one (`<main>`, else the one `<article>`, else `<body>`), without the parts that are
//! not its content (scripts, styles, navigation, headers, footers, forms, embedded frames);
//! headings, lists, tables and links are kept as Markdown.
//!
//! The page is a stranger's bytes, and a tree walk over a deeply nested page recurses, so this
//! runs only inside the `herald decode` worker (`JobKind::Html`), never in the daemon.

use std::rc::Rc;

use htmd::{HtmlToMarkdown, Node};
use markup5ever_rcdom::NodeData;

/// Elements dropped with everything inside them.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form",
    "iframe", "frame", "object", "embed", "svg", "canvas", "button", "select", "dialog", "head",
    "link", "meta",
];

/// The page's title and its main content as Markdown.
pub fn to_markdown(html: &str) -> String {
    let converter = HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build();
    let Ok(tree) = converter.html_to_tree(html) else {
        return String::new();
    };
    let title = find(&tree, &|n| is(n, "title")).map(|t| text_of(&t));
    let main = find(&tree, &|n| is(n, "main") || role_main(n))
        .or_else(|| only_article(&tree))
        .or_else(|| find(&tree, &|n| is(n, "body")))
        .unwrap_or_else(|| tree.clone());
    // The converter reads from a document node: the chosen element is handed over as the
    // only child of a fresh one. `tree` stays alive until the end: dropping rcdom's document
    // empties every node under it.
    let root = match main.data {
        NodeData::Document => main,
        _ => {
            let doc = Node::new(NodeData::Document);
            doc.children.borrow_mut().push(main);
            doc
        }
    };
    let body = converter.tree_to_markdown(&root);
    let out = match title.map(|t| t.split_whitespace().collect::<Vec<_>>().join(" ")) {
        Some(t) if !t.is_empty() && !body.starts_with("# ") => format!("# {t}\n\n{body}"),
        _ => body,
    };
    drop(tree);
    out
}

fn is(node: &Node, tag: &str) -> bool {
    matches!(&node.data, NodeData::Element { name, .. } if name.local.as_ref() == tag)
}

fn role_main(node: &Node) -> bool {
    let NodeData::Element { attrs, .. } = &node.data else {
        return false;
    };
    attrs
        .borrow()
        .iter()
        .any(|a| a.name.local.as_ref() == "role" && a.value.as_ref() == "main")
}

/// The first node (in document order, iteratively: no recursion on the page's depth) that
/// `want` accepts.
fn find(root: &Rc<Node>, want: &dyn Fn(&Node) -> bool) -> Option<Rc<Node>> {
    let mut stack = vec![root.clone()];
    while let Some(node) = stack.pop() {
        if want(&node) {
            return Some(node);
        }
        let children = node.children.borrow();
        stack.extend(children.iter().rev().cloned());
    }
    None
}

/// The page's `<article>` when it has exactly one (a blog post, a news story); a list of
/// articles is no single main content.
fn only_article(root: &Rc<Node>) -> Option<Rc<Node>> {
    let mut found = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(node) = stack.pop() {
        if is(&node, "article") {
            found.push(node.clone());
            continue;
        }
        stack.extend(node.children.borrow().iter().cloned());
    }
    (found.len() == 1).then(|| found.remove(0))
}

fn text_of(node: &Rc<Node>) -> String {
    let mut out = String::new();
    let mut stack = vec![node.clone()];
    while let Some(n) = stack.pop() {
        if let NodeData::Text { contents } = &n.data {
            out.push_str(&contents.borrow());
        }
        stack.extend(n.children.borrow().iter().rev().cloned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::to_markdown;

    #[test]
    fn the_main_content_becomes_markdown_with_its_links() {
        let page = r#"<!doctype html><html><head><title>Tide tables</title>
            <style>body{color:red}</style><script>alert('x')</script></head>
            <body><nav><a href="/home">Home</a> | <a href="/about">About</a></nav>
            <header>Site banner</header>
            <main><h1>High tide at noon</h1>
            <p>The <b>spring tide</b> peaks at 12:04, see
            <a href="https://example.org/tides">the table</a>.</p>
            <ul><li>Low: 06:10</li><li>High: 12:04</li></ul></main>
            <footer>Copyright nobody</footer></body></html>"#;
        let md = to_markdown(page);
        assert!(md.starts_with("# High tide at noon"), "{md}");
        assert!(md.contains("**spring tide**"), "{md}");
        assert!(
            md.contains("[the table](https://example.org/tides)"),
            "{md}"
        );
        assert!(md.contains("Low: 06:10"), "{md}");
        for gone in ["alert", "color:red", "Home", "Site banner", "Copyright"] {
            assert!(!md.contains(gone), "{gone:?} kept: {md}");
        }
    }

    #[test]
    fn without_a_main_element_the_body_is_used_under_the_title() {
        let md = to_markdown("<title> Notes </title><p>Just text.</p><script>x()</script>");
        assert_eq!(md, "# Notes\n\nJust text.");
        assert_eq!(to_markdown(""), "");
        let two = "<article><p>one</p></article><article><p>two</p></article>";
        let md = to_markdown(two);
        assert!(md.contains("one") && md.contains("two"), "{md}");
    }
}
