# A 200 MB steptrace-style trace: steps with nested phase spans and internals.
import json, sys
target = int(sys.argv[2]) * 1024 * 1024
out = open(sys.argv[1], "w")
out.write('{"traceEvents":[\n')
t = 0.0; n = 0; first = True; step = 0
def ev(d):
    global first
    out.write(("" if first else ",\n") + json.dumps(d, separators=(",", ":")))
    first = False
while out.tell() < target:
    ev({"ph":"B","name":f"ProfilerStep#{step}","pid":1,"tid":1,"ts":t,"cat":"steptrace"})
    for phase in ["data.load","transfer.h2d","forward","loss","backward","optimizer"]:
        ev({"ph":"B","name":phase,"pid":1,"tid":1,"ts":t+1,"cat":"steptrace","args":{"batch":str(step)}})
        for k in range(60):
            ev({"ph":"B","name":"launch_inner","pid":1,"tid":1,"ts":t+2+k*3,"cat":"cubecl_runtime::client"})
            ev({"ph":"E","name":"launch_inner","pid":1,"tid":1,"ts":t+4+k*3,"cat":"cubecl_runtime::client"})
            ev({"ph":"B","name":"reserve","pid":1,"tid":2,"ts":t+2+k*3,"cat":"cubecl_runtime::memory_management"})
            ev({"ph":"E","name":"reserve","pid":1,"tid":2,"ts":t+3+k*3,"cat":"cubecl_runtime::memory_management"})
        t += 200
        ev({"ph":"E","name":phase,"pid":1,"tid":1,"ts":t,"cat":"steptrace"})
    t += 5
    ev({"ph":"E","name":f"ProfilerStep#{step}","pid":1,"tid":1,"ts":t,"cat":"steptrace"})
    step += 1
out.write('\n],"displayTimeUnit":"ms","metadata":{"format":"steptrace-chrome-trace/1","cycle":0,"manifest":{"batch_size":256,"backend_kind":"cuda","sync_policy":"step","startup_steps":1}}}\n')
print(step, "steps")
