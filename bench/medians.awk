# Sourced by the VM benchmarks' reports (awk -f bench/medians.awk -f PROGRAM):
# values of round r and key k are in val[r, k]; rounds is the number of rounds.
function insert(v, m, x,   j) {
	for (j = m; j > 0 && v[j] > x; j--) v[j + 1] = v[j]
	v[j + 1] = x
	return m + 1
}
function middle(v, m) { return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2 }
function median(key,   v, m, r) {
	m = 0
	for (r = 1; r <= rounds; r++) if ((r, key) in val) m = insert(v, m, val[r, key])
	return m ? middle(v, m) : 0
}
# Median over the rounds of a/b (times scale, default 1) for keys ka, kb.
function pair(ka, kb, scale,   v, m, r) {
	m = 0
	if (scale == "") scale = 1
	for (r = 1; r <= rounds; r++)
		if ((r, ka) in val && (r, kb) in val && val[r, ka] > 0 && val[r, kb] > 0)
			m = insert(v, m, scale * val[r, ka] / val[r, kb])
	return m ? sprintf("%.2f", middle(v, m)) : "-"
}
function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "-" }
