// For each property regex, compute which code points the HF oracle's regex engine matches.
const {Tokenizer}=require('tokenizers');
function mk(re){
  const j={version:"1.0",truncation:null,padding:null,added_tokens:[],normalizer:null,
    pre_tokenizer:{type:"Split",pattern:{Regex:re},behavior:"Removed",invert:false},
    post_processor:null,decoder:null,model:{type:"BPE",dropout:null,unk_token:null,continuing_subword_prefix:null,end_of_word_suffix:null,fuse_unk:false,byte_fallback:false,vocab:{},merges:[]}};
  return Tokenizer.fromString(JSON.stringify(j));
}
const props=process.argv.slice(2);
const cps=[]; for(let c=0;c<0x110000;c++){ if(c>=0xD800&&c<=0xDFFF) continue; cps.push(c);} 
for(const p of props){
  const t=mk(p); const pt=t.getPreTokenizer();
  const matched=new Uint8Array(0x110000).fill(1);
  for(let i=0;i<cps.length;i+=4096){
    const chunk=cps.slice(i,i+4096); const s=String.fromCodePoint(...chunk);
    const res=pt.preTokenizeString(s);
    for(const [str,[a,b]] of res){ for(const ch of str){ matched[ch.codePointAt(0)]=0; } }
  }
  for(let c=0xD800;c<=0xDFFF;c++) matched[c]=0;
  // print ranges
  let out=[]; let st=-1;
  for(let c=0;c<=0x110000;c++){ const m=c<0x110000&&matched[c]; if(m&&st<0) st=c; if(!m&&st>=0){out.push([st,c-1]); st=-1;} }
  console.log(JSON.stringify({prop:p,ranges:out}));
}
