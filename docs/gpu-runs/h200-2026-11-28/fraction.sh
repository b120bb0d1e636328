R=$PWD; PY=/opt/torch/.venv/bin/python3; mkdir -p /tmp/t && cd /tmp/t && printf '[pytest]\n' > pytest.ini
for conf in none backend:cudaMallocAsync expandable_segments:True; do
  if [ "$conf" = none ]; then unset PYTORCH_CUDA_ALLOC_CONF; else export PYTORCH_CUDA_ALLOC_CONF=$conf; fi
  /usr/bin/time -f "%e s" env PYTHONPATH=$R timeout 120 $PY -m pytest -p pytest_gpucheck -p no:cacheprovider -p no:hypothesispytest -q --gpucheck --gpucheck-json=/tmp/t/r.json > /tmp/t/o.txt 2>/tmp/t/time.txt; echo "== $conf rc=$? $(tail -1 /tmp/t/time.txt)"
  $PY -c "
import json;r=json.load(open('/tmp/t/r.json'));f=r['facts']
print(r['verdict'], [(x['id'],x.get('subject'),x['severity']) for x in r['findings']])
print(json.dumps(f['torch_fraction']))
print('torch child', f['torch']['exit']['duration_s'], f['torch']['exit']['status'])
print([ (c['nodeid'].split('::')[-1], c['outcome']) for c in r['checks'] if 'torch' in c['nodeid']])"
  cp /tmp/t/r.json $OUT/r-${conf%%:*}.json; cp /tmp/t/o.txt $OUT/o-${conf%%:*}.txt
done
