old = {}
def parse(line):
    f = line.split()
    if len(f) < 10: return None
    if f[2] in ("zoom","one","bayes"): return (f[0],f[1],"",f[2]), f[3:]
    return (f[0],f[1],f[2],f[3]), f[4:]
for line in open("old.txt"):   # summ17.py over ../sim17_*.csv (the first zoom, eb4b888)
    p = parse(line)
    if p: old[p[0]] = p[1]
print(f"{'cell':5} {'tau':>5} {'grp':3} | {'oldzoom':>8} {'one':>8} {'bayes':>8} | {'NEW':>8} {'zoom%':>6} {'cov95':>6} {'cov90':>6} {'shown95':>7}")
for line in open("new.txt"):   # summ17.py over sim17_*.csv here (24b4b7a)
    p = parse(line)
    if not p: continue
    (cell,tau,grp,arm), rest = p
    g = lambda arm: old.get((cell,tau,grp,arm), ["","","-"])[2]
    print(f"{cell:5} {tau:>5} {grp:3} | {g('zoom'):>8} {g('one'):>8} {g('bayes'):>8} | {rest[2]:>8} {rest[1]:>6} {rest[6]:>6} {rest[8]:>6} {rest[4]:>7}")
