// Prometheus text format (version 0.0.4) parsed in the browser, and the
// arithmetic the console needs on it: counter rates between two scrapes
// and quantiles of a histogram's increase (as histogram_quantile does).

// parse returns the samples: [{name, labels: {k: v}, value}].
export function parse(text) {
  const out = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line[0] === "#") continue;
    let i = 0;
    while (i < line.length && /[A-Za-z0-9_:]/.test(line[i])) i++;
    const name = line.slice(0, i);
    const labels = {};
    if (line[i] === "{") {
      i++;
      for (;;) {
        while (line[i] === " " || line[i] === ",") i++;
        if (line[i] === "}") { i++; break; }
        let j = i;
        while (j < line.length && line[j] !== "=") j++;
        const key = line.slice(i, j).trim();
        i = j + 1;
        if (line[i] !== '"') return out; // malformed: keep what we have
        i++;
        let val = "";
        while (i < line.length && line[i] !== '"') {
          if (line[i] === "\\" && i + 1 < line.length) {
            const c = line[i + 1];
            val += c === "n" ? "\n" : c;
            i += 2;
          } else {
            val += line[i++];
          }
        }
        i++; // closing quote
        labels[key] = val;
      }
    }
    const rest = line.slice(i).trim().split(/\s+/);
    const value = parseValue(rest[0]);
    if (name && !Number.isNaN(value)) out.push({ name, labels, value });
  }
  return out;
}

function parseValue(s) {
  if (s === "+Inf") return Infinity;
  if (s === "-Inf") return -Infinity;
  if (s === "NaN") return NaN;
  return Number(s);
}

// sum adds the samples of one name whose labels include match.
export function sum(samples, name, match = {}) {
  let total = 0, found = false;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.keys(match).some((k) => s.labels[k] !== match[k])) continue;
    total += s.value;
    found = true;
  }
  return found ? total : null;
}

// buckets returns a histogram's cumulative buckets [{le, count}] sorted by le.
export function buckets(samples, name) {
  const by = new Map();
  for (const s of samples) {
    if (s.name !== name + "_bucket") continue;
    const le = parseValue(s.labels.le);
    by.set(le, (by.get(le) || 0) + s.value);
  }
  return [...by.entries()].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
}

// delta subtracts an earlier scrape's buckets (a counter reset, e.g. a
// restarted node, counts from zero).
export function delta(now, before) {
  const prev = new Map((before || []).map((b) => [b.le, b.count]));
  const reset = now.some((b) => b.count < (prev.get(b.le) || 0));
  return now.map((b) => ({ le: b.le, count: reset ? b.count : b.count - (prev.get(b.le) || 0) }));
}

// quantile estimates the q-quantile (0..1) of cumulative buckets by linear
// interpolation inside the bucket, like Prometheus' histogram_quantile.
// null when there are no observations.
export function quantile(q, bs) {
  if (!bs.length) return null;
  const total = bs[bs.length - 1].count;
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0, prevCount = 0;
  for (const b of bs) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe; // above the highest finite bound
      if (b.count === prevCount) return b.le;
      return prevLe + (b.le - prevLe) * ((rank - prevCount) / (b.count - prevCount));
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}

// rate is the per-second increase of a counter between two scrapes.
export function rate(now, before, seconds) {
  if (now === null || before === null || !(seconds > 0)) return null;
  const d = now >= before ? now - before : now; // reset
  return d / seconds;
}
