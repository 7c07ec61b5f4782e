// ONNX Runtime peer for bench_zoo: median latency of each exported zoo model (<dir>/<stem>.onnx) under
// onnxruntime-node, on the inputs stored in <dir>/<stem>.expected.safetensors (tensors input.<i>).
//
// Usage: NODE_PATH=<dir with node_modules> node zoo_ort.js <dir> <threads> <runs> <stem> [...]
// Prints one line per model: `<stem> <threads> <median ms> <VmHWM kB> <base kB>`: the process's peak resident set
// so far and its VmRSS before the first session was created (one model per process for a model's peak).
// Sessions use intraOpNumThreads = threads, sequential execution and every graph optimisation.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function readInputs(file) {
  const raw = fs.readFileSync(file);
  const n = Number(raw.readBigUInt64LE(0));
  const header = JSON.parse(raw.subarray(8, 8 + n).toString('utf8'));
  const base = 8 + n;
  const inputs = [];
  for (let i = 0; header[`input.${i}`]; ++i) {
    const e = header[`input.${i}`];
    const bytes = raw.subarray(base + e.data_offsets[0], base + e.data_offsets[1]);
    const copy = new Uint8Array(bytes).buffer;  // aligned copy
    inputs.push({dtype: e.dtype, shape: e.shape, data: e.dtype === 'F32' ? new Float32Array(copy) : new Int32Array(copy)});
  }
  return inputs;
}

// A `Vm...:` line of /proc/self/status in kB (0 where there is none).
function statusKb(key) {
  try {
    const m = fs.readFileSync('/proc/self/status', 'utf8').match(new RegExp(`^${key}:\\s*(\\d+)`, 'm'));
    return m ? Number(m[1]) : 0;
  } catch (e) {
    return 0;
  }
}

async function main() {
  const base = statusKb('VmRSS');
  const [dir, threadsArg, runsArg, ...stems] = process.argv.slice(2);
  const threads = Number(threadsArg), runs = Number(runsArg);
  console.log(`# onnxruntime-node ${require('onnxruntime-node/package.json').version}`);
  for (const stem of stems) {
    const session = await ort.InferenceSession.create(path.join(dir, `${stem}.onnx`), {
      intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all'});
    const stored = readInputs(path.join(dir, `${stem}.expected.safetensors`));
    const feeds = {};
    session.inputNames.forEach((name, i) => {
      const t = stored[i];
      // The zoo's integer inputs (token ids) are int64 in the ONNX model, i32 in rml.
      feeds[name] = t.dtype === 'F32' ? new ort.Tensor('float32', t.data, t.shape)
                                      : new ort.Tensor('int64', BigInt64Array.from(t.data, BigInt), t.shape);
    });
    for (let i = 0; i < 3; ++i) await session.run(feeds);
    const times = [];
    for (let i = 0; i < runs; ++i) {
      const start = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    times.sort((a, b) => a - b);
    const median = runs % 2 ? times[(runs - 1) / 2] : (times[runs / 2 - 1] + times[runs / 2]) / 2;
    console.log(`${stem} ${threads} ${median.toFixed(6)} ${statusKb('VmHWM')} ${base}`);
    await session.release();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
