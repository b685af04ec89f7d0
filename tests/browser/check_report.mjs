// Loads a report.html in headless Chromium and prints what a person would see, as JSON:
// console errors, the rendered size of every figure, the selection totals after ticking the
// given items, the items left when only those attributed within 10% are shown, and the
// page's visible text. Usage: node check_report.mjs REPORT.html INDEX...
// The browser is the system's chromium (PARPROF_CHROMIUM overrides the path).
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [report, ...indices] = process.argv.slice(2);
if (!report) {
  console.error("usage: node check_report.mjs REPORT.html INDEX...");
  process.exit(2);
}

const browser = await chromium.launch({
  executablePath: process.env.PARPROF_CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const result = { consoleErrors: [], requests: [], sections: [], figures: [], frames: [], before: "", totals: {}, shown: "", text: "", withinTenPercent: null };
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const url = pathToFileURL(path.resolve(report)).href;
  page.on("console", (m) => {
    if (m.type() === "error") result.consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => result.consoleErrors.push(String(e)));
  // The report must be self-contained: anything but the file itself and data: URLs is a fetch.
  page.on("request", (r) => {
    const u = r.url();
    if (u !== url && !u.startsWith("data:")) result.requests.push(u);
  });
  await page.goto(url, { waitUntil: "load" });

  // Every section: is it shown, and how much of the page does it take?
  result.sections = await page.$$eval("section[id]", (sections) =>
    sections.map((s) => {
      const box = s.getBoundingClientRect();
      const style = getComputedStyle(s);
      // A table wider than its box is read by scrolling it sideways, its last columns out of sight.
      const table = s.querySelector(".table");
      const tableOverflow = table ? table.scrollWidth - table.clientWidth : 0;
      return { id: s.id, heading: (s.querySelector("h2") || {}).textContent || "", width: box.width, height: box.height, visible: style.display !== "none" && style.visibility !== "hidden", tableOverflow };
    }),
  );
  result.figures = await page.$$eval("figure", (figs) =>
    figs.map((f) => {
      const shown = f.querySelector(".svg > svg, iframe.svg-frame");
      const box = shown ? shown.getBoundingClientRect() : { width: 0, height: 0 };
      return { caption: f.querySelector("figcaption").textContent, kind: shown ? shown.tagName.toLowerCase() : "none", width: box.width, height: box.height };
    }),
  );
  // Inside every iframe: the SVG document rendered with a size.
  for (const frame of page.frames().slice(1)) {
    const size = await frame.evaluate(() => {
      const svg = document.documentElement;
      const box = svg.getBoundingClientRect();
      return { root: svg.tagName, width: box.width, height: box.height };
    });
    result.frames.push(size);
  }

  // The selection of items exists when the run has counters attributed to items.
  if (await page.$("#items")) {
    result.before = await page.textContent("#selection");
    // As a person would: scroll to the table, then tick the boxes. (Without the scroll, the
    // first click of playwright-core 1.65 on this page, right after load, does not reach the
    // checkbox in Chromium 156.)
    await page.$eval("#items", (e) => e.scrollIntoView());
    for (const i of indices) {
      const box = `input.pick[data-index="${i}"]`;
      await page.click(box);
      if (!(await page.$eval(box, (b) => b.checked))) throw new Error(`item ${i} did not get selected`);
    }
    result.shown = await page.textContent("#selection");
    result.totals = await page.$$eval("#selection-totals tr[data-counter]", (rows) =>
      Object.fromEntries(
        rows.map((r) => [r.getAttribute("data-counter"), { value: r.querySelector(".value").textContent, error: r.querySelector(".error").textContent, left: (r.querySelector(".left") || {}).textContent, share: r.lastChild.textContent }]),
      ),
    );
    // The items left when only those attributed within 10% are asked for: their rows' text.
    if (await page.$("#max-error")) {
      await page.selectOption("#max-error", "0.1");
      result.withinTenPercent = await page.$$eval("#item-table tbody tr[data-index]", (rows) =>
        rows.filter((r) => r.style.display !== "none").map((r) => ({ index: Number(r.getAttribute("data-index")), text: r.innerText })),
      );
      await page.selectOption("#max-error", "all");
    }
  }
  // What a person reads: the page's rendered text (no scripts, nothing hidden).
  result.text = await page.evaluate(() => document.body.innerText);
  if (process.env.PARPROF_SCREENSHOT) {
    // Chromium paints a frame only while it is in view: the whole page in one view, then the
    // picture of it.
    await page.evaluate(() => window.scrollTo(0, 0));
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    await page.setViewportSize({ width: 1280, height: Math.min(height, 16000) });
    await page.waitForTimeout(500);
    await page.screenshot({ path: process.env.PARPROF_SCREENSHOT });
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
