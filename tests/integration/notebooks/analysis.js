// %% succeeded result="[ [ 'north', 78 ], [ 'south', 42 ], [ 'east', 55 ] ]"
const rows = [
  {region: 'north', product: 'tea', units: 30, price: 2.5},
  {region: 'south', product: 'tea', units: 12, price: 2.5},
  {region: 'north', product: 'coffee', units: 48, price: 4},
  {region: 'east', product: 'coffee', units: 20, price: 4},
  {region: 'south', product: 'cocoa', units: 30, price: 3},
  {region: 'east', product: 'tea', units: 35, price: 2.5},
];
const unitsByRegion = new Map();
for (const {region, units} of rows) {
  unitsByRegion.set(region, (unitsByRegion.get(region) ?? 0) + units);
}
[...unitsByRegion]
// %% failed exception=TypeError stderr~"toUpperCase2 is not a function"
const top = [...unitsByRegion].sort((a, b) => b[1] - a[1]).map(([region]) => region);
top[0].toUpperCase2()
// %% succeeded result="'NORTH'"
const top = [...unitsByRegion].sort((a, b) => b[1] - a[1]).map(([region]) => region);
top[0].toUpperCase()
// %% succeeded result="{ north: 267, south: 120, east: 167.5 }"
class Ledger {
  constructor(rows) { this.rows = rows; }
  revenue() {
    const out = {};
    for (const r of this.rows) out[r.region] = (out[r.region] ?? 0) + r.units * r.price;
    return out;
  }
}
new Ledger(rows).revenue()
// %% succeeded result="[ 'north', 'east', 'south' ]"
class Ledger {
  constructor(rows) { this.rows = rows; }
  revenue() {
    const out = {};
    for (const r of this.rows) out[r.region] = (out[r.region] ?? 0) + r.units * r.price;
    return out;
  }
  ranking() {
    return Object.entries(this.revenue()).toSorted((a, b) => b[1] - a[1]).map(([region]) => region);
  }
}
new Ledger(rows).ranking()
// %% failed exception=ReferenceError
const total = rows.reduce((sum, r) => sum + r.units * r.prise, 0) + undefinedDiscount;
// %% succeeded result="554.5"
const total = rows.reduce((sum, r) => sum + r.units * r.price, 0);
total
// %% succeeded result="{ fetched: 6, ms: true }"
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const started = Date.now();
await sleep(300);
({fetched: rows.length, ms: Date.now() - started >= 290})
// %% succeeded result="'linux'"
await sleep(20);
import os from 'node:os';
os.platform()
// %% succeeded files=summary.json result="{ total: 554.5, regions: 3 }"
import fs from 'node:fs';
import {join} from 'node:path';
fs.mkdirSync('/workspace/out', {recursive: true});
fs.writeFileSync(join('/workspace/out', 'summary.json'), JSON.stringify({total, regions: unitsByRegion.size}));
JSON.parse(fs.readFileSync('/workspace/out/summary.json', 'utf8'))
// %% succeeded files= result="[ 'coffee', 'tea' ]"
import {readFileSync} from 'fs';
const byProduct = Object.groupBy(rows, (r) => r.product);
const summary = JSON.parse(readFileSync('/workspace/out/summary.json', 'utf8'));
Object.keys(byProduct).filter((p) => byProduct[p].length > 1).toSorted()
// %% succeeded stdout~"reminder: total is 554.5" result="'reminded'"
setTimeout(() => console.log(`reminder: total is ${summary.total}`), 100);
await sleep(300);
'reminded'
// %% succeeded result="'ticking'"
let ticks = 0;
const ticker = setInterval(() => console.log(`tick ${++ticks}`), 50);
'ticking'
// %% succeeded stdout~"tick" result="true"
await sleep(300);
clearInterval(ticker);
ticks > 0
// %% timed_out timeout=2 stderr~"interrupted"
let spins = 0;
while (true) spins++;
// %% failed exit=3 stdout~"saving and leaving"
console.log('saving and leaving');
process.exit(3);
// %% succeeded result="[ true, 'NORTH', 554.5 ]"
[spins > 0, top[0].toUpperCase(), total]
// %% succeeded result="\"https://example.com/api?q=import%20x%20from%20y (it's 554.5)\""
const base = `https://example.com`;  // a URL in a template: no comment starts there
const query = encodeURIComponent(`import x from y`);
import {format} from 'node:util';
`${base}/api?q=${query} (${format('it\'s %s', total)})`
