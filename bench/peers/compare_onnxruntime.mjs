// ONNX Runtime's side of bench/peers/compare_onnxruntime.py: one process that loads an exported encoder
// and times InferenceSession.run on the same ids our tool encodes.
//
//   node bench/peers/compare_onnxruntime.mjs --ort DIR --model M.onnx --ids IDS.json --threads N
//        [--runs R] [--warmup W] [--out STATES.f32]
//
// DIR is a folder where `npm install --ignore-scripts onnxruntime-node@1.30.0` was run (a peer
// for benchmarks only, never a dependency of locost; --ignore-scripts skips the install script's
// download of GPU providers, which the CPU build does not need). The session runs as a user on a
// CPU would set it up: every graph optimization, intra-op threads N, one inter-op thread,
// sequential execution. Prints one line `RESULT {json}`: load seconds, each warm-up run's and each
// timed run's seconds, the median, tokens/s of the median, ORT's version and the process's peak
// RSS; --out writes the last run's output (float32, row-major (1, L, d_model)) for the driver's parity check.
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

function option(name, fallback) {
    const i = process.argv.indexOf(`--${name}`);
    if (i < 0 || i + 1 >= process.argv.length) {
        if (fallback === undefined) {
            console.error(`compare_onnxruntime.mjs: option '--${name}' is required`);
            process.exit(2);
        }
        return fallback;
    }
    return process.argv[i + 1];
}

const ortDir = option("ort");
const modelPath = option("model");
const idsPath = option("ids");
const threads = Number(option("threads"));
const runs = Number(option("runs", "3"));
const warmup = Number(option("warmup", "1"));
const outPath = option("out", "");

const require = createRequire(path.join(path.resolve(ortDir), "package.json"));
const ort = require("onnxruntime-node");

const ids = JSON.parse(readFileSync(idsPath, "utf8"));
if (!Array.isArray(ids) || ids.length === 0 || !ids.every(Number.isInteger)) {
    console.error(`compare_onnxruntime.mjs: ${idsPath}: expected a JSON array of token ids`);
    process.exit(2);
}
const input = new ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]);

const t0 = process.hrtime.bigint();
const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
});
const loadS = Number(process.hrtime.bigint() - t0) / 1e9;

let last = null;
const warmupTimes = [];
for (let i = 0; i < warmup; ++i) {
    const s = process.hrtime.bigint();
    last = await session.run({ input_ids: input });
    warmupTimes.push(Number(process.hrtime.bigint() - s) / 1e9);
}
const times = [];
for (let i = 0; i < runs; ++i) {
    const s = process.hrtime.bigint();
    last = await session.run({ input_ids: input });
    times.push(Number(process.hrtime.bigint() - s) / 1e9);
}
const out = last[session.outputNames[0]];
if (outPath) writeFileSync(outPath, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
const sorted = [...times].sort((a, b) => a - b);
const median = sorted[Math.floor(sorted.length / 2)];
console.log("RESULT " + JSON.stringify({
    runtime: `onnxruntime-node ${ort.env.versions?.node ?? "?"}`,
    length: ids.length,
    threads,
    load_s: loadS,
    warmup_s: warmupTimes,
    runs_s: times,
    median_s: median,
    tokens_per_s: ids.length / median,
    output_shape: out.dims,
    peak_rss_mib: process.resourceUsage().maxRSS / 1024,
}));
