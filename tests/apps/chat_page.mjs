// chat_page.mjs: the chat page of `oxidize serve` in headless Chromium (Debian's, driven by
// playwright-core; test_chat_page.py runs it). Prints what the page showed as JSON.
//   node chat_page.mjs NODE_MODULES URL SCREENSHOT
import { createRequire } from 'node:module';
import path from 'node:path';

const [modules, url, shot] = process.argv.slice(2);
const require = createRequire(path.join(modules, 'x.js'));
const { chromium } = require('playwright-core');
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(String(e)));
page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
const out = {};
await page.goto(url);
await page.waitForFunction(() => document.getElementById('model').textContent !== '…');
out.model = await page.textContent('#model');
await page.fill('#input', 'Who made the light?');
await page.press('#input', 'Enter');
await page.waitForSelector('.assistant[data-done="1"]', { timeout: 120000 });
out.user = await page.textContent('.user');
out.answer = await page.textContent('.assistant');
out.speed = await page.textContent('#speed');
// a second turn: the conversation goes on
await page.fill('#input', 'And then?');
await page.press('#input', 'Enter');
await page.waitForFunction(() => document.querySelectorAll('.assistant[data-done="1"]').length === 2,
                           null, { timeout: 120000 });
out.turns = await page.$$eval('.msg', (els) => els.map((e) => [e.className, e.textContent]));
await page.screenshot({ path: shot });
out.errors = errors;
await browser.close();
console.log(JSON.stringify(out));
