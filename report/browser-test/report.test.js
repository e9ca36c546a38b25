// The report page in a real browser: Debian's chromium, driven headless by playwright-core
// (which downloads no browser of its own). The page must load with no console error, no page
// error and no request beyond its own file; each plot's series must hold the points the fixture
// generated, its line broken wherever the fixture left a gap (no line may cross one); and the
// engine that re-cuts its own context (lossless) must show its re-cuts, in the summary and the
// tokens plot, where the host's compactions show none.
//
//   bash .ci/report-browser          (builds the fixture, installs what is missing, runs this)
//
// Environment: REPORT_HTML (the page), REPORT_EXPECTED (its counts; default: the page's name
// with .json), REPORT_NODE_MODULES (the folder holding node_modules/playwright-core),
// CHROMIUM (default /usr/bin/chromium). Without REPORT_HTML the tests skip and say why.

import assert from "node:assert/strict";
import { readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { pathToFileURL } from "node:url";

const HTML = process.env.REPORT_HTML;
const EXPECTED = process.env.REPORT_EXPECTED ?? HTML?.replace(/\.html$/, ".json");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const MODULES = resolve(process.env.REPORT_NODE_MODULES ?? join(import.meta.dirname, "../../target/report-browser"));
const PLOTS = ["tokens", "prefix", "engine-time"];

// Chromium's own background traffic is refused on a closed network, noisily; these flags stop
// it, and a root user needs --no-sandbox.
const ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

describe("the report page in chromium", { skip: HTML ? false : "REPORT_HTML is not set (run .ci/report-browser)" }, () => {
  let browser;
  let expected;

  before(async () => {
    expected = JSON.parse(readFileSync(EXPECTED, "utf8"));
    const { chromium } = createRequire(join(MODULES, "package.json"))("playwright-core");
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  });

  after(async () => {
    await browser?.close();
  });

  // Opens the page in a fresh context and records everything that went wrong while it loaded.
  async function open(options = {}) {
    const context = await browser.newContext(options);
    const page = await context.newPage();
    const problems = [];
    const url = pathToFileURL(resolve(HTML)).href;
    page.on("console", (message) => {
      if (message.type() === "error" || message.type() === "warning") problems.push(`console ${message.type()}: ${message.text()}`);
    });
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("request", (request) => {
      if (request.url() !== url) problems.push(`request: ${request.url()}`);
    });
    page.on("requestfailed", (request) => problems.push(`failed: ${request.url()}`));
    await page.goto(url, { waitUntil: "load" });
    return { context, page, problems };
  }

  test("the page is within 2 MB and loads with no error and no request", async () => {
    assert.equal(statSync(HTML).size, expected.bytes);
    assert.ok(expected.bytes <= 2 * 1024 * 1024, `${expected.bytes} bytes`);
    const { context, page, problems } = await open();
    assert.equal(await page.title(), `Generated session: legacy vs lossless, ${expected.turns} turns`);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("each plot holds one series per run with the expected points, and no line crosses a gap", async () => {
    const { context, page, problems } = await open();
    const plots = await page.evaluate((kinds) => {
      const out = {};
      for (const kind of kinds) {
        const svg = document.querySelector(`svg[data-plot="${kind}"]`);
        if (!svg) continue;
        // Pixels back to messages, by the scale the plot states.
        const d = svg.dataset;
        const message = (x) => +d.x0 + ((x - +d.left) / (+d.right - +d.left)) * (+d.x1 - +d.x0);
        out[kind] = [...svg.querySelectorAll("g.series")].map((series) => {
          const lines = [...series.querySelectorAll("polyline")].map((line) =>
            [...Array(line.points.numberOfItems).keys()].map((i) => message(line.points.getItem(i).x)),
          );
          const dots = series.querySelectorAll("circle").length;
          return {
            run: series.dataset.run,
            stated: Number(series.dataset.points),
            drawn: lines.reduce((sum, line) => sum + line.length, 0) + dots,
            lines: lines.length + dots,
            joined: lines.flatMap((line) => line.slice(1).map((to, i) => [line[i], to])),
            // The series must also have laid out: a box with some size inside the plot.
            width: series.getBBox().width,
          };
        });
      }
      return out;
    }, PLOTS);
    for (const kind of PLOTS) {
      assert.ok(plots[kind], `no svg[data-plot="${kind}"]`);
      assert.deepEqual(
        plots[kind].map(({ run, stated, drawn, lines }) => ({ run, stated, drawn, lines })),
        expected.runs.map((run) => {
          const { points, lines } = expected.plots[kind][run];
          return { run, stated: points, drawn: points, lines };
        }),
        kind,
      );
      for (const series of plots[kind]) {
        assert.ok(series.width > 100, `${kind} ${series.run} spans ${series.width} units`);
        const gaps = expected.plots[kind][series.run].gaps;
        assert.ok(kind !== "tokens" || gaps.length > 0, "the fixture has a stretch without turns");
        // A joined pair crosses a gap when it has a point on each side of the gap's middle
        // (points are drawn to a tenth of a unit, a few messages at this scale).
        for (const [from, to] of gaps) {
          const middle = (from + to) / 2;
          const crossing = series.joined.find(([a, b]) => a < middle && b > middle);
          assert.equal(crossing, undefined, `${kind} ${series.run}: a line joins ${crossing} across the gap ${from}..${to}`);
        }
      }
    }
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("an engine that re-cuts its own context shows re-cuts, and the host's compactions do not", async () => {
    const { context, page, problems } = await open();
    const shown = await page.evaluate((runs) => {
      const row = (label) => {
        const th = [...document.querySelectorAll("table.figures tbody th")].find((cell) => cell.textContent === label);
        return th ? [...th.parentElement.querySelectorAll("td")].map((cell) => Number(cell.textContent.replace(/,/g, ""))) : null;
      };
      const marks = (kind, run) =>
        [...document.querySelectorAll(`svg[data-plot="tokens"] g.${kind}[data-run="${run}"] path`)]
          .map((path) => (path.getAttribute("d").match(/M/g) ?? []).length)
          .reduce((sum, n) => sum + n, 0);
      return {
        compactions: row("compactions"),
        recuts: row("engine re-cuts"),
        compactionMarks: runs.map((run) => marks("cuts", run)),
        recutMarks: runs.map((run) => marks("recuts", run)),
        recutSection: [...document.querySelectorAll("h2")].some((h) => h.textContent === "Engine re-cuts"),
      };
    }, expected.runs);
    const per = (counts) => expected.runs.map((run) => counts[run]);
    assert.ok(expected.recuts.lossless > 0 && expected.compactions.lossless === 0, "the fixture's lossless re-cuts on its own");
    assert.deepEqual(shown.compactions, per(expected.compactions));
    assert.deepEqual(shown.recuts, per(expected.recuts));
    assert.deepEqual(shown.compactionMarks, per(expected.compactions));
    assert.deepEqual(shown.recutMarks, per(expected.recuts));
    assert.equal(shown.recutSection, true);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("hovering a plot shows each run's nearest turn, and leaving hides it", async () => {
    const { context, page, problems } = await open({ viewport: { width: 1280, height: 900 } });
    const plot = page.locator('svg[data-plot="tokens"]');
    await plot.scrollIntoViewIfNeeded();
    const box = await plot.boundingBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    const tip = page.locator("#tip");
    assert.equal(await tip.isVisible(), true);
    const lines = (await tip.textContent()).split("\n");
    assert.equal(lines.length, expected.runs.length);
    expected.runs.forEach((run, i) => assert.match(lines[i], new RegExp(`^${run}  message [0-9,]+  [0-9,]+ tokens`)));
    assert.equal(await plot.locator(".guide").getAttribute("visibility"), "visible");
    await page.mouse.move(1, 1);
    assert.equal(await tip.isVisible(), false);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("the page follows the system's dark scheme", async () => {
    const background = async (colorScheme) => {
      const { context, page, problems } = await open({ colorScheme });
      const colour = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      assert.deepEqual(problems, []);
      await context.close();
      return colour;
    };
    assert.equal(await background("light"), "rgb(255, 255, 255)");
    assert.equal(await background("dark"), "rgb(21, 23, 27)");
  });
});
