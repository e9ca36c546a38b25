// The report page in a real browser: Debian's chromium, driven headless by playwright-core
// (which downloads no browser of its own). The page must load with no console error, no page
// error and no request beyond its own file, and each plot's series must hold the points the
// fixture generated.
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
    assert.equal(await page.title(), `Generated session: legacy vs checkpoint-manager, ${expected.turns} turns`);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("each plot holds one series per run with the expected points", async () => {
    const { context, page, problems } = await open();
    const plots = await page.evaluate((kinds) => {
      const out = {};
      for (const kind of kinds) {
        const svg = document.querySelector(`svg[data-plot="${kind}"]`);
        if (!svg) continue;
        out[kind] = [...svg.querySelectorAll("polyline")].map((line) => ({
          run: line.dataset.run,
          stated: Number(line.dataset.points),
          drawn: line.points.numberOfItems,
          // The series must also have laid out: a box with some size inside the plot.
          width: line.getBBox().width,
        }));
      }
      return out;
    }, PLOTS);
    for (const kind of PLOTS) {
      assert.ok(plots[kind], `no svg[data-plot="${kind}"]`);
      assert.deepEqual(
        plots[kind].map(({ run, stated, drawn }) => ({ run, stated, drawn })),
        expected.runs.map((run) => ({ run, stated: expected.plots[kind][run], drawn: expected.plots[kind][run] })),
        kind,
      );
      for (const series of plots[kind]) assert.ok(series.width > 100, `${kind} ${series.run} spans ${series.width} units`);
    }
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
