// A person's review in headless Chromium, against a `harn web` the Rust test started
// (tests/browser.rs): the overview, the items, an item in review and its proof's diff, a
// rejection with feedback, the next attempt started from the page and its proof citing the
// feedback, acceptance and landing; an approval of a parked run and its resumption; a goal;
// a terminal harness's screen and its restart. A screenshot of each page at 1280x800 goes to
// SHOTS. Every step prints one line; any failure exits 1 with the page's text.
'use strict';
const { chromium } = require(process.env.PLAYWRIGHT);

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const LOGIN = env('LOGIN');
const SHOTS = env('SHOTS');
const CHROMIUM = env('CHROMIUM');
const FEEDBACK = env('FEEDBACK');
const base = new URL(LOGIN).origin;

function step(what) {
  console.log(`step: ${what}`);
}

async function shot(page, name) {
  await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: false });
  step(`screenshot ${name}.png`);
}

async function body(page) {
  return page.locator('body').innerText();
}

async function expectText(page, text, what) {
  const seen = await body(page);
  if (!seen.includes(text)) {
    throw new Error(`${what}: ${JSON.stringify(text)} not on ${page.url()}:\n${seen}`);
  }
}

// Reloads `path` until its page holds `text` (an attempt runs in the background).
async function waitFor(page, path, text, seconds) {
  const until = Date.now() + seconds * 1000;
  for (;;) {
    await page.goto(base + path);
    if ((await body(page)).includes(text)) return;
    if (Date.now() > until) await expectText(page, text, `after ${seconds} s`);
    await page.waitForTimeout(300);
  }
}

(async () => {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Root has no user namespace sandbox to give Chromium; the page itself runs no script.
    args: ['--no-sandbox'],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('dialog', (d) => errors.push(`a dialog opened: ${d.message()}`));

    await page.goto(LOGIN);
    await expectText(page, 'Goals', 'the overview after logging in');
    await shot(page, 'overview');

    await page.click('nav >> text=Items');
    await expectText(page, 'in_review', 'the items');
    await shot(page, 'items');

    await page.click('a[href="/items/it"]');
    await expectText(page, 'Reject with feedback', 'an item in review');
    await shot(page, 'item-in-review');

    await page.click('text=the latest proof and its diff');
    await expectText(page, 'a.txt', "the proof's diff, file by file");
    await expectText(page, '<script>alert(1)</script>', 'what the run wrote, as text');
    await shot(page, 'proof');

    await page.goto(base + '/items/it');
    await page.fill('textarea[name=feedback]', FEEDBACK);
    await page.click('button:has-text("Reject with feedback")');
    await expectText(page, `sent back with feedback: ${FEEDBACK}`, 'the rejection in the history');
    await expectText(page, 'web:', 'the web actor');
    step('rejected with feedback');

    await page.click('button:has-text("Run the next attempt")');
    await waitFor(page, '/items/it', 'Reject with feedback', 60);
    step('the next attempt ran');
    const runHref = await page
      .locator('a[href^="/runs/"]:not([href$="/proof"])')
      .last()
      .getAttribute('href');
    await page.goto(base + runHref);
    await expectText(page, 'ended', 'the run, as it went');
    await shot(page, 'run');
    await page.goto(base + runHref + '/proof');
    await expectText(page, `feedback received: ${FEEDBACK}`, 'the next attempt received the feedback');
    await shot(page, 'proof-after-feedback');

    await page.goto(base + '/items/it');
    await page.fill('form[action="/items/it/accept"] input[name=reason]', 'answers the review');
    await page.click('button:has-text("Accept")');
    await expectText(page, 'succeeded', 'accepted');
    await page.click('button:has-text("Land")');
    await expectText(page, 'landed', 'landed');
    await shot(page, 'item-landed');
    step('accepted and landed');

    await page.click('nav >> text=Approvals');
    await expectText(page, 'pending', 'a parked run waits');
    await shot(page, 'approvals');
    await page.click('button:has-text("Approve")');
    await expectText(page, 'approved', 'the ruling');
    await page.goto(base + '/items/ship');
    await page.click('button:has-text("Resume the run")');
    await waitFor(page, '/items/ship', 'Reject with feedback', 60);
    step('approved and resumed');

    await page.goto(base + '/goals/g');
    await expectText(page, 'graph', "a goal's graph");
    await shot(page, 'goal');

    await page.click('nav >> text=Harnesses');
    await expectText(page, 'shell', 'the harnesses');
    await shot(page, 'harnesses');
    await page.click('a[href="/harnesses/shell"]');
    await expectText(page, 'Screen', "a terminal harness's screen");
    await expectText(page, 'SHELL-READY <b>', 'its screen, as text');
    await shot(page, 'harness');
    await page.click('button:has-text("Restart")');
    await expectText(page, 'harness shell', 'back on the harness after a restart');
    step('restarted the harness');

    if (errors.length) throw new Error(`the pages raised: ${errors.join('; ')}`);
    step('done');
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(String(e && e.stack ? e.stack : e));
  process.exit(1);
});
